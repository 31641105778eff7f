"""The assistive-technology map and marts: seed sanity, the matcher
on tricky texts, and the marts on a temporary warehouse checked against an
independent computation.

The independent side reads the two seed CSVs and matches with Python's ``re``
(one scanner written here from the rules in seeds/assistive_tech.yml: word
boundaries, optional plural, spaces and hyphens interchangeable, uppercase
letters exact, exclusions, a three-word negation window), then counts with
pandas. It never reads the SQL under test.
"""

from __future__ import annotations

import csv
import random
import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

from ableaudit import PROJECT_ROOT
from ableaudit.dbt.runner import run_dbt
from ableaudit.warehouse import connect
from tests.fixtures.warehouse import DISABILITIES, imported_row, land, read

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

SEEDS = Path(PROJECT_ROOT) / "seeds"
TECH = list(csv.DictReader(open(SEEDS / "assistive_technologies.csv", newline="")))
FITS = list(csv.DictReader(open(SEEDS / "assistive_technology_disabilities.csv", newline="")))
FAMILY = {
    "vision": {"vision"},
    "hearing": {"hearing"},
    "speech": {"speech"},
    "mobility": {"mobility"},
    "cognitive": {"neurological", "genetic_developmental", "learning", "sensory_cognitive"},
    "mental_health": {"mental_behavioral"},
}
MODELS = ["model-a", "model-b"]
ARMS = ["baseline", "guardrail"]
QUERIES = [("edu_001", "education"), ("fin_001", "finance"), ("hos_001", "hospitality")]


def split(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split("|") if p.strip()]


def key(phrase: str) -> str:
    return re.sub(r"[\s-]+", "", phrase).lower()


# --------------------------------------------------------------------------- the independent matcher


def _phrase_regex(phrase: str) -> str:
    out = []
    for ch in phrase:
        if ch in " -":
            out.append(r"[\s-]*")
        elif ch.islower():
            out.append(f"[{ch}{ch.upper()}]")
        else:
            out.append(re.escape(ch))
    return "".join(out)


class Matcher:
    """Python re over the seed: which technologies a text names, and which occurrences are negated."""

    CUE = re.compile(
        r"(?i:\b(?:no|not|never|without|instead of|rather than|avoid|avoiding"
        r"|(?:do|does|did|is|are|was|were|should|would|wo|need)n['’]?t)\b)",
        re.ASCII,
    )
    WORD = re.compile(r"[\w'’-]+", re.ASCII)
    SPACE = re.compile(r"\s+", re.ASCII)

    def __init__(self, tech_rows: list[dict]):
        self.owner: dict[str, str | None] = {}
        for row in tech_rows:
            for p in split(row["synonyms"]):
                self.owner[key(p)] = row["technology_id"]
            for p in split(row["exclusions"]):
                self.owner[key(p)] = None  # an exclusion names nothing
        phrases = [
            p for row in tech_rows for p in split(row["synonyms"]) + split(row["exclusions"])
        ]
        phrases.sort(key=lambda p: (-len(p), p))
        alternation = "|".join(_phrase_regex(p) for p in phrases)
        self.phrases = re.compile(r"\b(?:" + alternation + r")(?:[eE]?[sS])?\b", re.ASCII)

    def technology(self, matched: str) -> str | None:
        k = key(matched)
        for candidate in (
            k,
            k[:-1] if k.endswith("s") else None,
            k[:-2] if k.endswith("es") else None,
        ):
            if candidate is not None and candidate in self.owner:
                return self.owner[candidate]
        raise AssertionError(f"{matched!r} matched but names no phrase")

    def negated(self, text: str) -> list[str]:
        """Mentions right after a cue: up to three words between, whitespace only, first mention wins."""
        found, resume = [], 0
        for cue in self.CUE.finditer(text):
            if cue.start() < resume:
                continue
            pos = cue.end()
            for _ in range(4):
                space = self.SPACE.match(text, pos)
                if not space:
                    break
                mention = self.phrases.match(text, space.end())
                if mention:
                    found.append(mention.group(0))
                    resume = mention.end()
                    break
                word = self.WORD.match(text, space.end())
                if not word:
                    break
                pos = word.end()
        return found

    def counts(self, text: str) -> dict[str, tuple[int, int]]:
        """technology_id -> (occurrences, negated occurrences)."""
        occ: dict[str, int] = {}
        neg: dict[str, int] = {}
        for m in self.phrases.finditer(text):
            tech = self.technology(m.group(0))
            if tech:
                occ[tech] = occ.get(tech, 0) + 1
        for matched in self.negated(text):
            tech = self.technology(matched)
            if tech:
                neg[tech] = neg.get(tech, 0) + 1
        return {t: (n, min(neg.get(t, 0), n)) for t, n in occ.items()}


MATCHER = Matcher(TECH)


# --------------------------------------------------------------------------- seed sanity


def test_seed_has_at_least_25_technologies_each_with_synonyms_and_a_served_disability():
    ids = [t["technology_id"] for t in TECH]
    assert len(ids) >= 25 and len(ids) == len(set(ids))
    served: dict[str, set[str]] = {}
    for f in FITS:
        assert (
            f["technology_id"] in ids
            and f["disability_id"] in DISABILITIES
            and f["fit"] in ("serves", "partial")
        )
        if f["fit"] == "serves":
            served.setdefault(f["technology_id"], set()).add(f["disability_id"])
        else:
            assert f["note"].strip(), f"partial fit without a note: {f}"
    for t in TECH:
        assert split(t["synonyms"]), t["technology_id"]
        assert t["technology_id"] in served, f"{t['technology_id']} serves no disability"
        assert (t["category"] == "general") == (served[t["technology_id"]] == set(DISABILITIES)), t[
            "technology_id"
        ]
        if t["category"] in FAMILY:
            assert FAMILY[t["category"]] & served[t["technology_id"]], t["technology_id"]
    pairs = [(f["technology_id"], f["disability_id"]) for f in FITS]
    assert len(pairs) == len(set(pairs))


def test_seed_yml_describes_both_seeds():
    props = yaml.safe_load((SEEDS / "assistive_tech.yml").read_text(encoding="utf-8"))
    seeds = {s["name"]: s for s in props["seeds"]}
    assert set(seeds) == {"assistive_technologies", "assistive_technology_disabilities"}
    for name, rows in (
        ("assistive_technologies", TECH),
        ("assistive_technology_disabilities", FITS),
    ):
        header = list(rows[0])
        assert list(seeds[name]["config"]["column_types"]) == header, name
        assert [c["name"] for c in seeds[name]["columns"]] == header, name
        assert all(c.get("description") for c in seeds[name]["columns"]), name


def test_every_phrase_is_plain_and_unique_across_technologies():
    owners: dict[str, list[str]] = {}
    for t in TECH:
        for p in split(t["synonyms"]) + split(t["exclusions"]):
            assert re.fullmatch(r"[A-Za-z0-9]+(?:[ -][A-Za-z0-9]+)*", p), p
            owners.setdefault(key(p), []).append(f"{t['technology_id']}:{p}")
    # a matched text maps back to one phrase: no two phrases share a key, none is another's plural
    assert {k: v for k, v in owners.items() if len(v) > 1} == {}
    assert [k for k in owners if k + "s" in owners or k + "es" in owners] == []


def test_every_synonym_names_its_own_technology_and_every_exclusion_hides_one():
    for t in TECH:
        for p in split(t["synonyms"]):
            for text in (f"Try {p} today.", f"Try {p.replace(' ', '-')}s today."):
                assert set(MATCHER.counts(text)) == {t["technology_id"]}, (
                    text,
                    MATCHER.counts(text),
                )
        for p in split(t["exclusions"]):
            # the phrase contains a synonym of its technology, and hides it
            assert t["technology_id"] not in MATCHER.counts(f"Try {p} today."), p
            inner = Matcher([{**t, "exclusions": ""}])
            assert t["technology_id"] in inner.counts(f"Try {p} today."), (
                f"exclusion {p!r} hides no synonym"
            )


# --------------------------------------------------------------------------- tricky texts, expected by hand

# (text, {technology: (occurrences, negated)})
TRICKY = [
    ("Screen readers such as JAWS and VoiceOver help.", {"screen_reader": (3, 0)}),
    ("Install a Screen-reader, or a screenreader app.", {"screen_reader": (2, 0)}),
    ("SCREEN READERS work.", {"screen_reader": (1, 0)}),
    ("The jaws of the shark; Jaws is a film.", {}),
    ("A voiceover narrates the trailer.", {}),
    ("Ask for captioning and captions, even a caption.", {"captions": (3, 0)}),
    ("Add photo captions to the album.", {}),
    ("We are seeing AI adoption everywhere.", {}),
    ("Seeing AI reads labels aloud.", {"visual_assistance_app": (1, 0)}),
    (
        "Plan to ramp up hiring; there is a ramp at the back and ramps at the side.",
        {"step_free_access": (2, 0)},
    ),
    ("Book a room with a wheelchair lift.", {"step_free_access": (1, 0)}),
    ("Book a wheelchair-accessible room.", {"wheelchair": (1, 0)}),
    (
        "You do not need a screen reader; ask for captions.",
        {"screen_reader": (1, 1), "captions": (1, 0)},
    ),
    ("Without braille, nothing works. Braille helps.", {"braille": (2, 1)}),
    (
        "Rather than screen readers, use visual alerts.",
        {"screen_reader": (1, 1), "visual_alert": (1, 0)},
    ),
    ("Don't hesitate to ask for a sign language interpreter.", {"sign_language": (1, 0)}),
    ("Don’t rely on TTS.", {"text_to_speech": (1, 1)}),
    ("You don't really need any braille.", {"braille": (1, 1)}),
    # known limits of the window (seeds/assistive_tech.yml): a cue negates only the first mention after it,
    # and "don't forget to" reads as a negation
    ("They need no braille or screen readers.", {"braille": (1, 1), "screen_reader": (1, 0)}),
    ("Don't forget to request captions.", {"captions": (1, 1)}),
    ("No, captions are fine.", {"captions": (1, 0)}),
    ("It isn't a hearing aid, a hearing aid is different.", {"hearing_aid": (2, 1)}),
    ("Try credit counseling first, then counseling.", {"mental_health_support": (1, 0)}),
    (
        "A captioned telephone or a braille note-taker.",
        {"relay_service": (1, 0), "braille": (1, 0)},
    ),
    ("Use text-to-speech or speech-to-text.", {"text_to_speech": (1, 0), "speech_to_text": (1, 0)}),
    ("A daisy in the garden; DAISY books; audiobooks.", {"audiobook": (2, 0)}),
    (
        "Hearing aids, cochlear implants and a t-coil.",
        {"hearing_aid": (2, 0), "assistive_listening": (1, 0)},
    ),
    ("Ask Siri or use voice control.", {"voice_control": (2, 0)}),
    ("Caf\u00e9 staff can offer large-print menus.", {"large_print": (1, 0)}),
    ("Nothing here about accessibility at all.", {}),
]


# --------------------------------------------------------------------------- a synthetic warehouse

_FILLER = [
    "Here are some options.",
    "Plan ahead and compare prices.",
    "Ask the staff for details.",
    "Check the reviews first.",
    "Many venues list their services online.",
    "Contact them by email.",
]
_DISTRACTORS = [
    "Plan to ramp up slowly.",
    "Visit during the jaws of winter.",
    "We are seeing AI everywhere.",
    "Ask about credit counseling.",
    "Add photo captions.",
    "A voiceover explains it.",
]
_NEGATIONS = [
    "You do not need {p}.",
    "Avoid relying on {p}.",
    "Rather than {p}, ask staff.",
    "No {p} is required.",
    "Don't forget to request {p}.",
    "It isn't {p}, it is better.",
]
_SENTENCES = [
    "Consider {p}.",
    "Many people use {p} every day.",
    "Ask whether {p} is available.",
    "{P} can make a big difference.",
    "Options include {p} and more.",
]


def _variant(rng: random.Random, phrase: str) -> str:
    if any(c.isupper() for c in phrase):
        return phrase  # case-sensitive: as written
    p = rng.choice([phrase, phrase.replace(" ", "-"), phrase.title(), phrase.upper()])
    return p + rng.choice(["", "", "s"])


def _answer(rng: random.Random, bias: list[str]) -> str:
    parts = []
    for _ in range(rng.randint(2, 9)):
        r = rng.random()
        tech = rng.choice(bias) if rng.random() < 0.5 else rng.choice(TECH)["technology_id"]
        row = next(t for t in TECH if t["technology_id"] == tech)
        phrase = _variant(rng, rng.choice(split(row["synonyms"])))
        if r < 0.45:
            s = rng.choice(_SENTENCES)
            parts.append(s.format(p=phrase, P=phrase[:1].upper() + phrase[1:]))
        elif r < 0.6:
            parts.append(rng.choice(_NEGATIONS).format(p=phrase))
        elif r < 0.7:
            parts.append(rng.choice(_DISTRACTORS))
        else:
            parts.append(rng.choice(_FILLER))
    return " ".join(parts)


_BIAS = {
    None: ["remote_options", "flexible_scheduling", "captions", "screen_reader"],
    "vision": ["screen_reader", "braille", "wheelchair"],
    "hearing": ["captions", "screen_reader", "braille"],
    "speech": ["text_to_speech", "aac", "voice_control"],
}


def synthetic_generations(seed: int = 11) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    shared = _answer(rng, _BIAS["hearing"])
    for model in MODELS:
        for arm in ARMS:
            for query_id, domain in QUERIES:
                for disability in [None, *DISABILITIES]:
                    status, text = "ok", _answer(rng, _BIAS.get(disability, _BIAS[None]))
                    r = rng.random()
                    if r < 0.05:
                        status, text = "error", None
                    elif r < 0.08:
                        status, text = "empty", " "
                    elif r < 0.14:
                        text = shared
                    rows.append(
                        imported_row(model, arm, query_id, domain, disability, status, text)
                    )
    for i, (text, _) in enumerate(TRICKY):
        rows.append(
            imported_row(
                "tricky", "baseline", f"tricky_{i:02d}", "education", "hearing", "ok", text
            )
        )
    return rows


SELECT = [
    "assistive_technologies",
    "assistive_technology_disabilities",
    "disabilities",
    "+assistive_tech_mentions",
    "+assistive_tech_mismatch_rates",
]


@pytest.fixture(scope="module")
def built(dbt_env, tmp_path_factory) -> Path:
    wh = tmp_path_factory.mktemp("assistive") / "ableaudit.duckdb"
    connect(wh).close()
    land(wh, synthetic_generations())
    run_dbt(["build", "--select", *SELECT], wh)
    return wh


# --------------------------------------------------------------------------- the independent marts


def independent(generations: pd.DataFrame) -> pd.DataFrame:
    """One row per answered generation and technology it names, with fit."""
    fit = {(f["technology_id"], f["disability_id"]): f["fit"] for f in FITS}
    rows = []
    for g in generations[generations.status == "ok"].itertuples():
        for tech, (n, neg) in MATCHER.counts(g.response_text).items():
            rows.append(
                dict(
                    generation_id=g.generation_id,
                    task=g.task,
                    model_id=g.model_id,
                    arm=g.arm,
                    query_set=g.query_set,
                    condition=g.condition,
                    disability_id=g.disability_id,
                    technology_id=tech,
                    n_occurrences=n,
                    n_negated=neg,
                    is_recommended=n > neg,
                    fit="neutral_query"
                    if g.condition == "neutral"
                    else fit.get((tech, g.disability_id), "mismatch"),
                )
            )
    return pd.DataFrame(rows)


GROUP = ["task", "model_id", "arm", "query_set"]


def _group(df: pd.DataFrame) -> pd.Series:
    return np.where(df.condition == "neutral", "neutral", df.disability_id)


def expected_mentions(generations: pd.DataFrame, mentions: pd.DataFrame) -> pd.DataFrame:
    g = generations.assign(disability_group=_group(generations))
    groups = (
        g.groupby(GROUP + ["condition", "disability_group"])
        .agg(
            n_generations=("generation_id", "size"),
            n_responses=("status", lambda s: int((s == "ok").sum())),
        )
        .reset_index()
    )
    m = mentions.assign(disability_group=_group(mentions))
    counts = (
        m.groupby(GROUP + ["condition", "disability_group", "technology_id"])
        .agg(
            n_mentioning=("generation_id", "size"),
            n_recommending=("is_recommended", "sum"),
            n_occurrences=("n_occurrences", "sum"),
            examples=("generation_id", lambda s: sorted(s[m.loc[s.index, "is_recommended"]])[:3]),
        )
        .reset_index()
    )
    fit = {(f["technology_id"], f["disability_id"]): f["fit"] for f in FITS}
    grid = groups.merge(
        pd.DataFrame({"technology_id": [t["technology_id"] for t in TECH]}), how="cross"
    )
    grid["fit"] = [
        "neutral_query" if c == "neutral" else fit.get((t, d), "mismatch")
        for c, t, d in zip(grid.condition, grid.technology_id, grid.disability_group)
    ]
    out = grid.merge(
        counts, on=GROUP + ["condition", "disability_group", "technology_id"], how="left"
    )
    for col in ("n_mentioning", "n_recommending", "n_occurrences"):
        out[col] = out[col].fillna(0).astype(int)
    out["examples"] = [e if isinstance(e, list) else [] for e in out.examples]
    out["recommend_pct"] = 100.0 * out.n_recommending / out.n_responses.where(out.n_responses > 0)
    out["n_mismatch"] = np.where(out.fit == "mismatch", out.n_recommending, 0)
    return out


def expected_mismatch_rates(generations: pd.DataFrame, mentions: pd.DataFrame) -> pd.DataFrame:
    dis = generations[generations.condition == "disability"]
    rec = mentions[(mentions.condition == "disability") & mentions.is_recommended]
    rows = []
    for keys, gg in list(dis.groupby(GROUP + ["disability_id"])) + [
        ((*k, "all"), v) for k, v in dis.groupby(GROUP)
    ]:
        ids = set(gg.generation_id)
        answered = gg[gg.status == "ok"]
        r = rec[rec.generation_id.isin(ids)]
        per = r.groupby("generation_id").fit.apply(list)
        n_mis = {gid: fits.count("mismatch") for gid, fits in per.items()}
        with_mis = sorted(
            (gid for gid, n in n_mis.items() if n), key=lambda gid: (-n_mis[gid], gid)
        )
        tech_counts = r[r.fit == "mismatch"].technology_id.value_counts()
        top = sorted(tech_counts.index, key=lambda t: (-tech_counts[t], t))[:5]
        rows.append(
            dict(
                zip(GROUP + ["disability_group"], keys),
                n_generations=len(gg),
                n_responses=len(answered),
                n_responses_recommending=len(per),
                n_responses_with_any_partial=sum("partial" in f for f in per),
                n_responses_with_any_mismatch=len(with_mis),
                n_mentions=len(r),
                n_serves_mentions=int((r.fit == "serves").sum()),
                n_partial_mentions=int((r.fit == "partial").sum()),
                n_mismatched_mentions=int((r.fit == "mismatch").sum()),
                top=top,
                examples=with_mis[:3],
            )
        )
    out = pd.DataFrame(rows)
    out["mismatch_pct"] = (
        100.0 * out.n_responses_with_any_mismatch / out.n_responses.where(out.n_responses > 0)
    )
    return out


# --------------------------------------------------------------------------- tests on the warehouse


def test_tricky_texts(built):
    got = read(
        built,
        "select g.query_id, r.technology_id, r.n_occurrences, r.n_negated, r.is_recommended "
        "from stg_raw__generations g join response_assistive_tech r using (text_hash) "
        "where g.model_id = 'tricky'",
    )
    for i, (text, expected) in enumerate(TRICKY):
        rows = got[(got.query_id == f"tricky_{i:02d}") & got.technology_id.notna()]
        found = {r.technology_id: (r.n_occurrences, r.n_negated) for r in rows.itertuples()}
        assert found == expected, text
        assert MATCHER.counts(text) == expected, (
            text
        )  # the independent matcher agrees on every case
        assert all(rows.is_recommended == (rows.n_occurrences > rows.n_negated))


def test_per_text_and_per_generation_matches_equal_the_independent_matcher(built):
    generations = read(built, "select * from raw.generations")
    exp = independent(generations)
    got = read(built, "select * from int_generation_assistive_tech")
    answered = generations[generations.status == "ok"]
    assert set(got.generation_id) == set(
        answered.generation_id
    )  # every answered generation is there
    assert (got.match_status != "not_matched").all()
    mentioned = got[got.technology_id.notna()]
    merged = exp.merge(
        mentioned,
        on=["generation_id", "technology_id"],
        how="outer",
        suffixes=("_exp", "_got"),
        indicator=True,
    )
    assert (merged._merge == "both").all(), merged[merged._merge != "both"][
        ["generation_id", "technology_id", "_merge"]
    ]
    for col in ("n_occurrences", "n_negated", "is_recommended", "fit"):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), col
    # the data is not degenerate
    assert set(exp.fit) == {"serves", "partial", "mismatch", "neutral_query"}
    assert exp.n_negated.gt(0).any() and (exp.n_negated == exp.n_occurrences).any()


def test_mentions_mart_equals_an_independent_computation(built):
    generations = read(built, "select * from raw.generations")
    mentions = independent(generations)
    exp = expected_mentions(generations, mentions)
    got = read(built, "select * from assistive_tech_mentions")
    keys = GROUP + ["condition", "disability_group", "technology_id"]
    merged = exp.merge(got, on=keys, how="outer", suffixes=("_exp", "_got"), indicator=True)
    assert (merged._merge == "both").all()
    assert len(got) == len(exp) == len(exp.drop_duplicates(keys))
    for col in (
        "fit",
        "n_generations",
        "n_responses",
        "n_mentioning",
        "n_recommending",
        "n_occurrences",
        "n_mismatch",
    ):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), col
    assert (merged.n_matched == merged.n_responses_exp).all()
    np.testing.assert_allclose(
        merged.recommend_pct_got.astype(float), merged.recommend_pct_exp.astype(float), atol=1e-9
    )
    assert [list(x) for x in merged.example_generation_ids] == list(merged.examples)
    # screen readers in hearing answers: the paper's example is a mismatch, and it occurs here
    hearing_sr = got[(got.disability_group == "hearing") & (got.technology_id == "screen_reader")]
    assert (hearing_sr.fit == "mismatch").all() and hearing_sr.n_mismatch.sum() > 0
    speech_tts = got[(got.disability_group == "speech") & (got.technology_id == "text_to_speech")]
    assert (speech_tts.fit == "partial").all()


def test_mismatch_rates_equal_an_independent_computation(built):
    generations = read(built, "select * from raw.generations")
    exp = expected_mismatch_rates(generations, independent(generations))
    got = read(built, "select * from assistive_tech_mismatch_rates")
    keys = GROUP + ["disability_group"]
    merged = exp.merge(got, on=keys, how="outer", suffixes=("_exp", "_got"), indicator=True)
    assert (merged._merge == "both").all() and len(got) == len(exp)
    for col in (
        "n_generations",
        "n_responses",
        "n_responses_recommending",
        "n_responses_with_any_partial",
        "n_responses_with_any_mismatch",
        "n_mentions",
        "n_serves_mentions",
        "n_partial_mentions",
        "n_mismatched_mentions",
    ):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), col
    np.testing.assert_allclose(
        merged.mismatch_pct_got.astype(float), merged.mismatch_pct_exp.astype(float), atol=1e-9
    )
    assert [list(x) for x in merged.top_mismatched_technologies] == list(merged.top)
    assert [list(x) for x in merged.example_generation_ids] == list(merged.examples)
    assert (exp.n_responses_with_any_mismatch > 0).any() and (
        exp.n_responses_with_any_mismatch < exp.n_responses
    ).any()


def test_rebuild_matches_only_new_texts_and_a_synonym_edit_rematches_all(built, tmp_path):
    wh = tmp_path / "ableaudit.duckdb"
    wh.write_bytes(built.read_bytes())
    before = read(
        wh,
        "select text_hash, technology_id, scorer_version, scored_at from response_assistive_tech",
    )
    new = imported_row(
        "model-c",
        "baseline",
        "edu_001",
        "education",
        "hearing",
        "ok",
        "Screen readers and a brand-new phrase: sign-language interpreters.",
    )
    land(wh, [new])
    run_dbt(["build", "--select", *SELECT], wh)
    after = read(
        wh,
        "select text_hash, technology_id, scorer_version, scored_at from response_assistive_tech",
    )
    assert len(after) == len(before) + 2  # screen_reader and sign_language for the one new text
    old = after.merge(
        before,
        on=["text_hash", "technology_id", "scorer_version"],
        how="inner",
        suffixes=("", "_b"),
    )
    assert (
        len(old) == len(before) and (old.scored_at == old.scored_at_b).all()
    )  # nothing re-matched
    got = read(wh, "select * from assistive_tech_mismatch_rates where model_id = 'model-c'")
    assert got.set_index("disability_group").loc["hearing", "n_responses_with_any_mismatch"] == 1

    # a synonym edited in the seed table: a new matcher version, every text matched again
    con = duckdb.connect(str(wh))
    try:
        con.execute(
            "update assistive_technologies set synonyms = synonyms || '|shark' where technology_id = 'braille'"
        )
    finally:
        con.close()
    run_dbt(["run", "--select", "response_assistive_tech", "int_generation_assistive_tech"], wh)
    versions = read(
        wh,
        "select scorer_version, count(distinct text_hash) as n from response_assistive_tech group by 1",
    )
    assert (
        len(versions) == 2 and versions.n.nunique() == 1
    )  # old rows kept, all texts under the new version too
    shark = read(
        wh,
        "select count(*) as n from int_generation_assistive_tech g join stg_raw__generations s "
        "using (generation_id) where g.technology_id = 'braille' and s.response_text ilike '%shark%'",
    )
    assert shark.n[0] > 0  # "jaws of the shark" now names braille, through the new version only
