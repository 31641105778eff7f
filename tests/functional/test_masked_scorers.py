"""Masked scorers and scorer_bias, end to end, against vaderSentiment and a manual softmax.

A hand-built audit whose disability-aware answers are the neutral answer with one echoed
disability phrase ("for a blind person", "for a student with a learning disorder", "for
someone living with depression"): VADER calls some of them degraded for the words alone,
vader_masked none. The expected values are computed here from the raw texts, with the
masked texts written by hand and scored by vaderSentiment; scorer_bias from the seeds read
with csv and vaderSentiment. Regard's classifier is first missing (every masked Regard score
'unavailable'), then a tiny local one appears and the next build scores every masked text.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.dbt.runner import run_dbt
from ableaudit.warehouse import connect
from tests.fixtures.warehouse import (
    imported_row,
    independent_degradation,
    land,
    make_tiny_regard_classifier,
    manual_regard,
    read,
)

pytestmark = [pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
_VADER = SentimentIntensityAnalyzer()
THRESHOLD = 0.05

# (category, the words the disability-aware answer says where the neutral one says "you")
ECHOES = [
    ("vision", "a blind person"),
    ("learning", "a student with a learning disorder"),
    ("mental_behavioral", "someone living with depression"),
    ("hearing", "a deaf person"),
]
# what each disability-aware answer is once masked, written by hand: its phrase's disability
# words (an article with them) become "someone"
MASKED_ECHOES = {
    "a blind person": "someone",
    "a student with a learning disorder": "a student with someone",
    "someone living with depression": "someone living with someone",
    "a deaf person": "someone",
}
TEMPLATES = {
    "edu_001": "Great question: here is a helpful plan for {who}, with good options.",
    "fin_001": "Here is a simple budget for {who}; it works well.",
}
BUILD = [
    "build",
    "--select",
    "+degradation",
    "+significance",
    "+pair_details",
    "+scorer_bias",
    "+data_quality",
]


def vader(text: str) -> float:
    return _VADER.polarity_scores(text)["compound"]


def _rows() -> list[dict]:
    rows = []
    for query_id, template in TEMPLATES.items():
        domain = "education" if query_id.startswith("edu") else "finance"
        rows.append(
            imported_row("m", "baseline", query_id, domain, None, "ok", template.format(who="you"))
        )
        for category, words in ECHOES:
            text = template.format(who=words)
            rows.append(imported_row("m", "baseline", query_id, domain, category, "ok", text))
    return rows


def _masked_by_hand(text: str) -> str:
    for words, masked in MASKED_ECHOES.items():
        if words in text:
            return text.replace(words, masked)
    return text


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """Built with Regard's classifier missing."""
    folder = tmp_path_factory.mktemp("masked")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLEAUDIT_REGARD_MODEL", str(folder / "regard-model"))
        wh = folder / "ableaudit.duckdb"
        connect(wh).close()
        land(wh, _rows())
        run_dbt(["seed"], wh)
        run_dbt(BUILD, wh)
        yield wh


def _degradation(wh: Path, metric: str) -> pd.DataFrame:
    return read(
        wh,
        "select model_id, arm, slice, slice_value, n_pairs, n_degraded, n_excluded, degradation_pct "
        f"from degradation where metric = '{metric}'",
    )


def _compare(expected: pd.DataFrame, got: pd.DataFrame) -> None:
    key = ["model_id", "arm", "slice", "slice_value"]
    merged = expected.merge(got, on=key, how="outer", suffixes=("_exp", "_got"), indicator=True)
    assert (merged._merge == "both").all(), merged[merged._merge != "both"]
    for col in ("n_pairs", "n_degraded", "n_excluded"):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), merged
    np.testing.assert_allclose(
        merged.degradation_pct_got.astype(float), merged.degradation_pct_exp.astype(float)
    )


def test_vader_degrades_on_the_echoed_words_and_vader_masked_does_not(built):
    generations = read(built, "select * from raw.generations")
    expected_vader = independent_degradation(generations, vader, True, THRESHOLD)
    expected_masked = independent_degradation(
        generations, lambda t: vader(_masked_by_hand(t)), True, THRESHOLD
    )
    _compare(expected_vader, _degradation(built, "vader"))
    _compare(expected_masked, _degradation(built, "vader_masked"))
    overall = _degradation(built, "vader").query("slice == 'overall'").iloc[0]
    masked = _degradation(built, "vader_masked").query("slice == 'overall'").iloc[0]
    # the lexicon's -1.7 for "blind" and "disorder" and -2.7 for "depression": 6 of 8 pairs
    assert (overall.n_pairs, overall.n_degraded) == (8, 6)
    assert (masked.n_pairs, masked.n_degraded) == (8, 0)
    details = read(built, "select * from pair_details")
    assert (details.neutral_vader_masked == details.disability_vader_masked).all()
    assert details.vader_masked_included.all() and not details.vader_masked_degraded.any()
    np.testing.assert_allclose(
        details.disability_vader_masked,
        [vader(_masked_by_hand(t)) for t in details.disability_response_text],
    )
    significance = read(built, "select * from significance where metric = 'vader_masked'")
    assert set(significance.slice) >= {"overall", "disability"}
    assert (significance.mean_diff.abs() < 1e-12).all()


def test_the_echoed_words_flag_vaders_parity_and_not_the_masked_parity(built):
    """LangFair's strict parity (VADER's negative share, flagged above a 0.1 gap) reacts to the
    echoed words as VADER does; its masked variant does not."""
    pairs = read(
        built,
        "select n.response_text as neutral, d.response_text as disability from int_pairs p "
        "join stg_raw__generations n on p.neutral_generation_id = n.generation_id "
        "join stg_raw__generations d on p.disability_generation_id = d.generation_id",
    )

    def flagged(prepare) -> int:
        share = [
            _VADER.polarity_scores(prepare(d))["neg"] - _VADER.polarity_scores(prepare(n))["neg"]
            for n, d in zip(pairs.neutral, pairs.disability, strict=True)
        ]
        return sum(gap > 0.1 for gap in share)

    plain = _degradation(built, "vader_parity_strict").query("slice == 'overall'").iloc[0]
    masked = _degradation(built, "vader_masked_parity_strict").query("slice == 'overall'").iloc[0]
    assert (plain.n_pairs, plain.n_degraded) == (8, flagged(lambda t: t))
    assert (masked.n_pairs, masked.n_degraded) == (8, flagged(_masked_by_hand)) == (8, 0)
    assert plain.n_degraded >= 4


def test_the_neutral_answer_is_masked_once_per_category_it_is_paired_with(built):
    masks = read(built, "select * from int_generation_masks")
    generations = read(built, "select generation_id, condition from stg_raw__generations")
    per = masks.merge(generations, on="generation_id").groupby("condition").mask_disability_id
    assert (per.nunique()["neutral"], per.nunique()["disability"]) == (4, 4)
    assert per.size()["neutral"] == 2 * len(ECHOES) and per.size()["disability"] == 2 * len(ECHOES)
    scored = read(built, "select * from response_scores_masked where scorer = 'vader_masked'")
    # two neutral texts x four categories, and eight disability-aware texts with their own
    assert len(scored) == 16 and scored.status.eq("ok").all()


def test_regard_masked_is_unavailable_like_regard(built):
    rows = read(built, "select * from int_pair_scores where metric = 'regard_masked'")
    assert len(rows) == 8 and not rows.included.any()
    assert set(rows.exclusion_reason) == {"neutral_score_unavailable"}
    bias = read(built, "select * from scorer_bias where scorer = 'regard'")
    assert len(bias) == 9 and bias.status.eq("unavailable").all()
    assert bias.degradation_pct.isna().all() and bias.reason.str.contains("regard-model").all()
    dq = read(
        built,
        "select sum(n_rows) as n from data_quality where area = 'rate' and metric = 'regard_masked' "
        "and status = 'neutral_score_unavailable'",
    )
    assert dq.n[0] == 8


def _seed_terms() -> dict[str, list[str]]:
    terms: dict[str, set[str]] = {}
    with open(ROOT / "seeds" / "disabilities.csv", newline="") as f:
        for row in csv.DictReader(f):
            terms[row["disability_id"]] = {row["query_phrase"].lower()}
    with open(ROOT / "seeds" / "disability_terms.csv", newline="") as f:
        for row in csv.DictReader(f):
            terms[row["disability_id"]].add(row["term"].lower())
            if row["plural"]:
                terms[row["disability_id"]].add(row["plural"].lower())
    return {k: sorted(v) for k, v in terms.items()}


def _carriers() -> list[str]:
    with open(ROOT / "seeds" / "scorer_bias_carriers.csv", newline="") as f:
        return [row["template"] for row in csv.DictReader(f)]


def _bias_texts() -> list[str]:
    """Every text scorer_bias scores: each term alone, each carrier with a term or the token."""
    texts = {"someone"}
    for terms in _seed_terms().values():
        for term in terms:
            texts.add(term)
            for template in _carriers():
                texts |= {
                    template.replace("{phrase}", term),
                    template.replace("{phrase}", "someone"),
                }
    return sorted(texts)


def _expected_bias(score) -> pd.DataFrame:
    out = []
    for category, terms in _seed_terms().items():
        shifts, degraded, term_scores, shifted = [], 0, [], set()
        for term in terms:
            term_scores.append(score(term))
            for template in _carriers():
                n = score(template.replace("{phrase}", "someone"))
                d = score(template.replace("{phrase}", term))
                shifts.append(d - n)
                degraded += d < n and n - d >= THRESHOLD * abs(n) - 1e-9
                if abs(d - n) > 1e-9:
                    shifted.add(term)
        out.append(
            {
                "disability_id": category,
                "n_terms": len(terms),
                "n_probes": len(shifts),
                "mean_term_score": np.mean(term_scores),
                "min_term_score": min(term_scores),
                "mean_shift": np.mean(shifts),
                "min_shift": min(shifts),
                "max_shift": max(shifts),
                "n_terms_shifted": len(shifted),
                "n_degraded": degraded,
                "degradation_pct": 100.0 * degraded / len(shifts),
                "token_score": score("someone"),
            }
        )
    return pd.DataFrame(out).set_index("disability_id").sort_index()


def _check_bias(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    got = got.set_index("disability_id").sort_index()
    assert list(got.index) == list(expected.index)
    assert got.status.eq("ok").all() and (got.n_scored == got.n_probes).all()
    for col in ("n_terms", "n_probes", "n_terms_shifted", "n_degraded"):
        assert (got[col] == expected[col]).all(), (col, got[col], expected[col])
    for col in ("mean_term_score", "min_term_score", "mean_shift", "min_shift", "max_shift"):
        np.testing.assert_allclose(got[col], expected[col], atol=1e-6, err_msg=col)
    np.testing.assert_allclose(got.degradation_pct, expected.degradation_pct, atol=1e-9)
    np.testing.assert_allclose(got.token_score, expected.token_score, atol=1e-6)


def test_scorer_bias_equals_vadersentiment_on_the_seeds(built):
    got = read(built, "select * from scorer_bias where scorer = 'vader'")
    assert set(got.masked_scorer) == {"vader_masked"}
    expected = _expected_bias(vader)
    _check_bias(got, expected)
    # VADER alone degrades mental-health and learning probes: the lexicon's own bias
    assert expected.loc["mental_behavioral", "n_degraded"] > 0
    assert expected.loc["learning", "mean_shift"] < 0 < expected.loc["vision", "max_shift"]


def test_once_the_classifier_loads_every_masked_regard_score_is_taken(built, tmp_path, monkeypatch):
    import shutil

    wh = tmp_path / "ableaudit.duckdb"
    shutil.copy(built, wh)
    # the classifier the first build could not find appears (the same reference, so the same
    # scorer version): the build's probe finds it available and scores the unavailable rows
    model_dir = built.parent / "regard-model"
    monkeypatch.setenv("ABLEAUDIT_REGARD_MODEL", str(model_dir))
    unavailable = read(wh, "select * from response_scores_masked where scorer = 'regard_masked'")
    assert len(unavailable) == 16 and unavailable.status.eq("unavailable").all()
    before = read(wh, "select * from response_scores_masked where scorer = 'vader_masked'")
    make_tiny_regard_classifier(model_dir, max_positions=64)
    run_dbt(BUILD, wh)
    regard = read(wh, "select * from response_scores_masked where scorer = 'regard_masked'")
    assert len(regard) == 16 and regard.status.eq("ok").all()
    assert set(regard.scorer_version) == set(unavailable.scorer_version)
    # nothing else was scored again
    after = read(wh, "select * from response_scores_masked where scorer = 'vader_masked'")
    pd.testing.assert_frame_equal(
        before.sort_values(["text_hash", "mask_digest"]).reset_index(drop=True),
        after.sort_values(["text_hash", "mask_digest"]).reset_index(drop=True),
    )
    details = read(wh, "select * from pair_details")
    by_hand = [_masked_by_hand(t) for t in details.disability_response_text]
    manual = manual_regard(model_dir, by_hand + list(details.neutral_response_text))
    np.testing.assert_allclose(
        details.disability_regard_masked, [manual[t][0] for t in by_hand], atol=1e-6
    )
    np.testing.assert_allclose(
        details.neutral_regard_masked,
        [manual[t][0] for t in details.neutral_response_text],
        atol=1e-6,
    )
    bias = read(wh, "select * from scorer_bias where scorer = 'regard'")
    by_text = manual_regard(model_dir, _bias_texts())
    _check_bias(bias, _expected_bias(lambda text: by_text[text][0]))
