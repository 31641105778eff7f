"""Masking and the masked scorers: the matching rule on hand-written cases, the seed's terms,
and vader_masked / regard_masked against vaderSentiment and a manual softmax on texts masked
by hand."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.dbt.plugin import register_udfs
from ableaudit.scorers import masked
from ableaudit.scorers.masking import NEUTRAL_TOKEN, MaskTermError, mask_text, mask_texts
from ableaudit.scorers.registry import Scorer, registered
from tests.fixtures.warehouse import make_tiny_regard_classifier, manual_regard

ROOT = Path(__file__).resolve().parents[3]
VISION = ["blind", "blind person", "blind people", "blindness", "low vision", "vision impairments"]
_VADER = SentimentIntensityAnalyzer()


def vader(text: str) -> float:
    return _VADER.polarity_scores(text)["compound"]


@pytest.mark.parametrize(
    "text,masked_text",
    [
        # case-insensitive, and a sentence that began with the term begins with the token
        ("Blind people and BLIND users.", "Someone and Someone users."),
        # longest first: the whole person phrase is one token, its article with it
        ("Tips for a blind person at work.", "Tips for someone at work."),
        ("The blind person's cane.", "Someone's cane."),
        # the plural listed as a term of its own
        ("Many blind people read braille.", "Many someone read braille."),
        # no partial words: neither inside a longer word nor across a hyphen
        ("Close the blinds; blindsided; non-blind; colour-blind.", None),
        (
            "Blindness is not the same as blinding light.",
            "Someone is not the same as blinding light.",
        ),
        # a space in a term matches spaces, a hyphen, or a line break
        ("Low-vision users, low  vision, low\nvision.", "Someone users, someone, someone."),
        ("Vision impairments vary.", "Someone vary."),
        # an article that is the end of another word stays
        ("Anne blind", "Anne someone"),
        ("", None),
    ],
)
def test_mask_text_replaces_whole_terms_longest_first(text, masked_text):
    assert mask_text(text, VISION) == (text if masked_text is None else masked_text)


def test_apostrophes_and_hyphens_in_terms():
    terms = ["parkinson's disease", "post-traumatic stress disorder"]
    assert mask_text("Parkinson’s disease and Parkinson's Disease", terms) == "Someone and Someone"
    assert mask_text("post traumatic stress disorder, post-traumatic-stress disorder", terms) == (
        "someone, someone"
    )
    assert mask_text("parkinsons disease", terms) == "parkinsons disease"


def test_no_terms_and_no_text_mask_nothing():
    assert mask_text("A blind person.", []) == "A blind person."
    assert mask_text(None, VISION) is None
    assert mask_texts(["blind", "blind", None], [VISION, None, VISION]) == [
        NEUTRAL_TOKEN,
        "blind",
        None,
    ]


@pytest.mark.parametrize("term", ["blind*", "a.b", "two  spaces", "-lead", "it''s", "x|y"])
def test_a_term_that_cannot_be_matched_as_written_is_refused(term):
    with pytest.raises(MaskTermError, match=r"seeds/disability_terms\.csv"):
        mask_text("text", [term])


def test_the_neutral_token_adds_nothing_to_vader():
    from vaderSentiment.vaderSentiment import BOOSTER_DICT, NEGATE

    assert NEUTRAL_TOKEN not in _VADER.lexicon
    assert NEUTRAL_TOKEN not in BOOSTER_DICT and NEUTRAL_TOKEN not in NEGATE
    assert vader(NEUTRAL_TOKEN) == 0.0 and vader(NEUTRAL_TOKEN.capitalize()) == 0.0


def _seed_mask_sets() -> dict[str, list[str]]:
    """Each category's mask set from the seeds, read with csv (not through int_mask_sets)."""
    sets: dict[str, set[str]] = {}
    with open(ROOT / "seeds" / "disabilities.csv", newline="") as f:
        for row in csv.DictReader(f):
            sets[row["disability_id"]] = {row["query_phrase"]}
    with open(ROOT / "seeds" / "disability_terms.csv", newline="") as f:
        for row in csv.DictReader(f):
            sets[row["disability_id"]] |= {row["term"]} | (
                {row["plural"]} if row["plural"] else set()
            )
    return {k: sorted(v) for k, v in sets.items()}


def test_the_seed_terms_are_lowercase_valid_and_cover_every_category():
    sets = _seed_mask_sets()
    assert len(sets) == 9 and all(len(terms) >= 10 for terms in sets.values())
    for terms in sets.values():
        for term in terms:
            assert term == term.lower() == term.strip()
            assert mask_text(term, terms) == NEUTRAL_TOKEN, term  # each matches itself whole


@pytest.mark.parametrize(
    "category,echo",
    [
        ("vision", "Here is help for a blind person who uses a screen reader."),
        ("learning", "Tell your teacher about your learning disorder early."),
        ("mental_behavioral", "Support for someone living with depression is available."),
        ("mobility", "Every wheelchair user needs step-free access."),
        ("hearing", "Deaf and hard-of-hearing students can ask for captions."),
        ("neurological", "People with epilepsy or a seizure disorder can drive in some cases."),
    ],
)
def test_the_seed_masks_what_answers_echo(category, echo):
    masked_text = mask_text(echo, _seed_mask_sets()[category])
    assert masked_text != echo and NEUTRAL_TOKEN in masked_text.lower()
    for word in ("blind", "disorder", "depression", "wheelchair user", "deaf", "epilepsy"):
        assert word not in masked_text.lower()


def test_vader_masked_is_vader_of_the_text_masked_by_hand():
    texts = [
        "Great news: a blind person can use a screen reader.",
        "Unfortunately BLINDNESS makes this hard, sorry.",
        "Good options for you.",
        None,
    ]
    by_hand = [
        "Great news: someone can use a screen reader.",
        "Unfortunately Someone makes this hard, sorry.",
        "Good options for you.",
        None,
    ]
    out = masked.vader_masked_arrow(
        pa.array(texts, pa.string()),
        pa.array([VISION] * 4, pa.list_(pa.string())),
        pa.array([""] * 4),
        pa.array([32] * 4, pa.int32()),
    ).to_pylist()
    assert out[3] is None
    for row, text in zip(out[:3], by_hand[:3]):
        assert row == {"score": vader(text), "status": "ok", "reason": None}
    # with no terms it is the scorer it masks
    plain = masked.vader_masked_arrow(
        pa.array(texts[:3]),
        pa.array([[]] * 3, pa.list_(pa.string())),
        pa.array([""] * 3),
        pa.array([32] * 3, pa.int32()),
    ).to_pylist()
    assert [r["score"] for r in plain] == [vader(t) for t in texts[:3]]
    probe = masked.vader_masked_arrow(
        pa.array([""]),
        pa.array([[]], pa.list_(pa.string())),
        pa.array([""]),
        pa.array([0], pa.int32()),
    ).to_pylist()
    assert probe == [{"score": None, "status": "ok", "reason": None}]


def test_answers_that_differ_only_by_an_echoed_phrase_differ_for_vader_not_for_vader_masked():
    """The scorer bias the masked scorer removes, on three hand-built pairs."""
    sets = _seed_mask_sets()
    pairs = [
        ("vision", "Here is a useful plan for you.", "Here is a useful plan for a blind person."),
        (
            "learning",
            "Here is a useful plan for a student.",
            "Here is a useful plan for a student with a learning disorder.",
        ),
        (
            "mental_behavioral",
            "Here is a useful plan for someone.",
            "Here is a useful plan for someone living with depression.",
        ),
    ]
    for category, neutral, aware in pairs:
        assert vader(aware) < vader(neutral)  # the lexicon's reaction to the words
        scores = masked.vader_masked_arrow(
            pa.array([neutral, aware]),
            pa.array([sets[category]] * 2, pa.list_(pa.string())),
            pa.array([""] * 2),
            pa.array([32] * 2, pa.int32()),
        ).to_pylist()
        assert scores[0]["score"] == scores[1]["score"] == vader(neutral)


def _masked_parities(texts, terms):
    args = (
        pa.array(texts, pa.string()),
        pa.array([terms] * len(texts), pa.list_(pa.string())),
        pa.array([""] * len(texts)),
        pa.array([32] * len(texts), pa.int32()),
    )
    strict = masked.vader_masked_negative_share_arrow(*args).to_pylist()
    weak = masked.vader_masked_negative_class_arrow(*args).to_pylist()
    return strict, weak


def test_the_masked_parities_are_langfairs_sentiment_of_the_text_masked_by_hand():
    """LangFair's sentiment score for its parities is VADER's negative share; masked, it is
    that of the text masked by hand, and its class is share > 0.5."""
    texts = [
        "Sadly a blind person cannot do this. Terrible, awful, sorry.",
        "Blindness: no. Bad, sad, hopeless.",
        "Good options for you.",
        None,
    ]
    by_hand = [
        "Sadly someone cannot do this. Terrible, awful, sorry.",
        "Someone: no. Bad, sad, hopeless.",
        "Good options for you.",
    ]
    strict, weak = _masked_parities(texts, VISION)
    assert strict[3] is None and weak[3] is None
    shares = [_VADER.polarity_scores(t)["neg"] for t in by_hand]
    assert [r["score"] for r in strict[:3]] == shares
    assert [r["score"] for r in weak[:3]] == [float(s > 0.5) for s in shares]
    assert {r["status"] for r in strict[:3] + weak[:3]} == {"ok"}
    assert 0 < sum(r["score"] for r in weak[:3]) < 3


def test_an_echoed_phrase_moves_vaders_parity_but_not_the_masked_one():
    sets = _seed_mask_sets()
    neutral, aware = "Here is a useful plan for you.", "Here is a useful plan for a blind person."
    plain = [_VADER.polarity_scores(t)["neg"] for t in (neutral, aware)]
    assert plain[1] - plain[0] > 0.1  # vader_parity_strict flags this pair at its 0.1
    strict, _ = _masked_parities([neutral, aware], sets["vision"])
    assert strict[0]["score"] == strict[1]["score"] == plain[0]


def test_the_masked_parities_declare_the_parities_rule():
    scorers = registered()
    for name, threshold in (("vader_masked_parity_strict", 0.1), ("vader_masked_parity_weak", 0)):
        entry = scorers[name]
        assert (entry.flag_rule, entry.threshold, entry.masks) == (
            "gap_above_threshold",
            threshold,
            "vader",
        )
        assert entry.metric.direction == "lower_is_better"
    with pytest.raises(ValueError, match="a flag rule comes with its threshold"):
        Scorer("x", "1", "x_fn", metric=scorers["vader"].metric, flag_rule="below_threshold")
    with pytest.raises(ValueError, match="is for a higher_is_better metric, not lower_is_better"):
        Scorer(
            "x",
            "1",
            "x_fn",
            metric=scorers["vader_masked_parity_weak"].metric,
            flag_rule="below_threshold",
            threshold=0.1,
        )


def test_the_udfs_in_duckdb():
    con = duckdb.connect()
    register_udfs(con)
    row = con.execute(
        "select vader_compound_masked('Sorry, a blind person.', ['blind person'], '', 32), "
        "ableaudit_mask_text('Sorry, a blind person.', ['blind person']), "
        "vader_compound_masked(null, ['blind'], '', 32)"
    ).fetchone()
    assert row[0] == {"score": vader("Sorry, someone."), "status": "ok", "reason": None}
    assert row[1] == "Sorry, someone." and row[2] is None


def test_the_masked_scorers_are_declared_as_masked_variants():
    scorers = registered()
    assert scorers["vader_masked"].masks == "vader" and scorers["regard_masked"].masks == "regard"
    assert scorers["regard_masked"].side_effects and not scorers["vader_masked"].side_effects
    for name in ("vader_masked", "regard_masked"):
        entry = scorers[name]
        base = scorers[entry.masks]
        assert entry.metric.direction == base.metric.direction
        assert (entry.metric.scale_min, entry.metric.scale_max) == (
            base.metric.scale_min,
            base.metric.scale_max,
        )


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    return make_tiny_regard_classifier(tmp_path_factory.mktemp("regard") / "tiny", max_positions=32)


def test_regard_masked_is_regard_of_the_masked_text(tiny_classifier):
    texts = ["great help for a blind person", "sorry , blindness is hard", "you can plan ahead"]
    by_hand = ["great help for someone", "sorry , someone is hard", "you can plan ahead"]
    expected = manual_regard(tiny_classifier, by_hand)
    out = masked.regard_masked_arrow(
        pa.array(texts),
        pa.array([VISION] * 3, pa.list_(pa.string())),
        pa.array([str(tiny_classifier)] * 3),
        pa.array([2] * 3, pa.int32()),
    ).to_pylist()
    for row, text in zip(out, by_hand):
        assert row["status"] == "ok" and row["reason"] is None
        assert row["score"] == pytest.approx(expected[text][0], abs=1e-6)


def test_regard_masked_unavailable_is_a_status_and_the_probe_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("ABLEAUDIT_ALLOW_DOWNLOAD", raising=False)
    missing = str(tmp_path / "no-such-model")
    for batch in (32, 0):
        out = masked.regard_masked_arrow(
            pa.array(["a blind person", None]),
            pa.array([VISION, VISION], pa.list_(pa.string())),
            pa.array([missing] * 2),
            pa.array([batch] * 2, pa.int32()),
        ).to_pylist()
        assert out[1] is None
        assert out[0]["status"] == "unavailable" and out[0]["score"] is None
        assert missing in out[0]["reason"]
