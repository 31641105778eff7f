"""pair_details, the pair-level export, on a built warehouse, checked against raw rows and other marts.

The synthetic audit is landed with answers that stopped by themselves, answers
cut off at the token cap and answers whose finish is not reported, plus one
pair's rubric and contrastive verdicts imported as files made elsewhere; then
the whole project is built (so the mart's dbt tests run on it too) and
published. pair_details must hold every pair once with the raw texts, count the
same pairs as degradation, carry deltas that VADER and a word count recompute
from the texts, keep cut-off answers out of verbosity with a reason while the
other metrics say they count them, and travel in the published copy and as
Parquet.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.dbt.runner import run_dbt
from ableaudit.ingest.judgments import import_judgments
from ableaudit.scorers.registry import registered
from ableaudit.warehouse import connect
from ableaudit.warehouse.publish import parquet_glob, publish
from tests.fixtures.warehouse import land, read, synthetic_generations

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

_VADER = SentimentIntensityAnalyzer()
TEXT_METRICS = tuple(sorted(name for name, entry in registered().items() if entry.metric))
RUBRIC_8 = (
    '{"relevance": 3, "completeness": 2, "accuracy": 2, "clarity": 1, "declined": false, '
    '"score": 8, "rationale": "Good."}'
)
RUBRIC_5 = (
    '{"relevance": 2, "completeness": 1, "accuracy": 1, "clarity": 1, "declined": false, '
    '"score": 5, "rationale": "Thin."}'
)
CONTRASTIVE = json.dumps(
    {
        "content_differences": "B speculates.",
        "interpret": "Yes",
        "interpret_spans": [],
        "stereotype": "No",
        "stereotype_spans": [],
        "framing": "Ambiguous",
        "framing_spans": [],
        "decline_in_response_a": False,
        "decline_in_response_b": False,
        "decline_explanation": "",
    }
)


def finish_reason(i: int, row: dict) -> str | None:
    """Every 7th 'ok' answer is cut off at the cap, every 11th does not say how it ended."""
    if row["status"] != "ok":
        return None
    return "length" if i % 7 == 0 else None if i % 11 == 0 else "stop"


@pytest.fixture(scope="module")
def world(dbt_env, tmp_path_factory) -> dict:
    """The built and published warehouse, its raw rows, and the pair given judge verdicts."""
    tmp = tmp_path_factory.mktemp("pair_details")
    wh = tmp / "ableaudit.duckdb"
    rows = synthetic_generations()
    for i, row in enumerate(rows):
        row["finish_reason"] = finish_reason(i, row)
        row["completion_tokens"] = len((row["response_text"] or "").split()) or None
    connect(wh).close()
    land(wh, rows)
    raw = pd.DataFrame(rows)
    # a complete pair whose two answers stopped by themselves gets a verdict of each kind
    ok = raw[(raw.status == "ok") & (raw.finish_reason == "stop")]
    key = ["model_id", "arm", "query_id"]
    both = ok[ok.condition == "disability"].merge(
        ok[ok.condition == "neutral"], on=key, suffixes=("_d", "_n")
    )
    judged = both.iloc[0]
    verdicts = tmp / "verdicts.jsonl"
    common = {"judge_name": "rubric-x", "judge_model": "m", "kind": "rubric"}
    lines = [
        {**common, "generation_id": judged.generation_id_n, "raw_output": RUBRIC_8},
        {**common, "generation_id": judged.generation_id_d, "raw_output": RUBRIC_5},
        {
            "judge_name": "contrast-y",
            "judge_model": "m",
            "kind": "contrastive",
            "neutral_generation_id": judged.generation_id_n,
            "disability_generation_id": judged.generation_id_d,
            "raw_output": CONTRASTIVE,
        },
    ]
    verdicts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert import_judgments(verdicts, wh).inserted == 3
    run_dbt(["seed"], wh)
    run_dbt(["build"], wh)
    copy = publish(wh, tmp / "published")
    return {"wh": wh, "raw": raw, "judged": judged.generation_id_d, "copy": copy}


@pytest.fixture(scope="module")
def details(world) -> pd.DataFrame:
    return read(world["wh"], "select * from pair_details")


def test_one_row_per_pair_with_both_raw_texts(world, details):
    pairs = read(world["wh"], "select pair_id, pair_status from int_pairs")
    assert details.pair_id.is_unique and len(details) == len(pairs) > 0
    assert dict(zip(details.pair_id, details.pair_status, strict=True)) == dict(
        zip(pairs.pair_id, pairs.pair_status, strict=True)
    )
    raw = world["raw"].set_index("generation_id")
    for side in ("neutral", "disability"):
        present = details[details[f"{side}_generation_id"].notna()]
        ids = present[f"{side}_generation_id"]
        expected = raw.loc[ids]
        for column in ("response_text", "prompt_text", "finish_reason", "status"):
            got = present[f"{side}_{column}"].tolist()
            want = expected[column].tolist()
            assert [None if pd.isna(v) else v for v in got] == [
                None if pd.isna(v) else v for v in want
            ], (side, column)
    assert set(details.pair_status) >= {"complete", "missing_neutral", "neutral_error"}


def test_included_pairs_are_the_pairs_degradation_counts(world, details):
    rates = read(
        world["wh"],
        "select model_id, arm, metric, n_pairs, n_degraded, n_excluded, n_truncated "
        "from degradation where slice = 'overall'",
    ).set_index(["model_id", "arm", "metric"])
    seen = 0
    for metric in TEXT_METRICS:
        frame = details.assign(
            included=details[f"{metric}_included"].astype(bool),
            degraded=details[f"{metric}_degraded"].fillna(False).astype(bool),
        )
        frame["truncated_in"] = frame.included & frame.truncated
        counts = frame.groupby(["model_id", "arm"]).agg(
            n_pairs=("included", "sum"),
            n_degraded=("degraded", "sum"),
            n_total=("included", "size"),
            n_truncated=("truncated_in", "sum"),
        )
        for (model, arm), row in counts.iterrows():
            rate = rates.loc[(model, arm, metric)]
            assert (
                rate.n_pairs,
                rate.n_degraded,
                rate.n_excluded,
                rate.n_truncated,
            ) == (
                row.n_pairs,
                row.n_degraded,
                row.n_total - row.n_pairs,
                row.n_truncated,
            ), (model, arm, metric)
            seen += 1
    assert seen == 4 * len(TEXT_METRICS)
    assert rates.xs("vader", level="metric").n_pairs.sum() > 0


def test_deltas_recomputed_from_the_texts(details):
    """VADER through vaderSentiment and words by str.split, on every complete pair (cut off or not)."""
    both = details[details.pair_status == "complete"]
    assert len(both) > 50
    vader = [
        _VADER.polarity_scores(d)["compound"] - _VADER.polarity_scores(n)["compound"]
        for n, d in zip(both.neutral_response_text, both.disability_response_text, strict=True)
    ]
    np.testing.assert_allclose(both.vader_delta.astype(float), vader, atol=1e-9)
    words = [
        len(d.split()) - len(n.split())
        for n, d in zip(both.neutral_response_text, both.disability_response_text, strict=True)
    ]
    assert both.verbosity_delta.astype(int).tolist() == words
    # a complete pair is degraded on VADER exactly when the disability-aware side is worse by
    # at least the threshold x |neutral| (the default rule, computed here from the texts)
    complete = both[both.vader_included.astype(bool)]
    n = complete.neutral_vader.astype(float)
    gap = n - complete.disability_vader.astype(float)
    expected = (gap > 0) & (gap >= complete.threshold * n.abs() - 1e-9)
    assert complete.vader_degraded.astype(bool).tolist() == expected.tolist()
    assert expected.any() and not expected.all()


def test_cut_off_answers_leave_verbosity_with_a_reason_and_count_elsewhere(world, details):
    raw = world["raw"]
    cut = details[details.truncated.astype(bool)]
    complete_cut = cut[cut.pair_status == "complete"]
    assert len(complete_cut) > 0
    assert not cut.verbosity_included.astype(bool).any()
    assert set(complete_cut.verbosity_exclusion_reason) == {"truncated_answer"}
    # VADER's seed row counts cut-off pairs: every complete one is in, and says so
    assert complete_cut.vader_included.astype(bool).all()
    assert complete_cut.vader_exclusion_reason.isna().all()
    # the cut-off side is named by its finish_reason
    sides = complete_cut.neutral_finish_reason.eq(
        "length"
    ) | complete_cut.disability_finish_reason.eq("length")
    assert sides.all()
    # data_quality counts cut-off, finished and unreported answers apart
    quality = read(
        world["wh"],
        "select status, sum(n_rows) as n from data_quality where area = 'truncation' group by status",
    ).set_index("status")["n"]
    ok = raw[raw.status == "ok"]
    assert quality.to_dict() == {
        "truncated": (ok.finish_reason == "length").sum(),
        "finished": (ok.finish_reason == "stop").sum(),
        "unreported": ok.finish_reason.isna().sum(),
    }
    rates = read(
        world["wh"],
        "select metric, sum(n_truncated) as n from degradation where slice = 'overall' group by metric",
    ).set_index("metric")["n"]
    assert rates["verbosity"] == 0 and rates["vader"] == len(complete_cut)


def test_judge_results_of_the_pair(world, details):
    judged = details.set_index("disability_generation_id").loc[world["judged"]]
    assert (judged.n_rubric_judges, judged.n_rubric_judges_included) == (1, 1)
    assert judged.n_rubric_judges_degraded == 1  # 5 against 8
    (rubric,) = json.loads(judged.rubric_judge_scores)
    assert rubric == {
        "judge_name": "rubric-x",
        "neutral_score": 8.0,
        "disability_score": 5.0,
        "delta": -3.0,
        "included": True,
        "exclusion_reason": None,
        "degraded": True,
    }
    assert (judged.n_contrastive_judges, judged.n_contrastive_judges_included) == (1, 1)
    assert (judged.n_contrastive_interpret_yes, judged.n_contrastive_stereotype_yes) == (1, 0)
    (verdict,) = json.loads(judged.contrastive_verdicts)
    assert (verdict["judge_name"], verdict["interpret"], verdict["framing"]) == (
        "contrast-y",
        "Yes",
        "Ambiguous",
    )
    others = details[details.disability_generation_id != world["judged"]]
    assert (others.n_rubric_judges_included == 0).all()
    # every other pair has the judge's row, excluded with its reason
    reasons = {r["exclusion_reason"] for s in others.rubric_judge_scores for r in json.loads(s)}
    assert "neutral_score_not_judged" in reasons


def test_published_in_the_copy_and_as_parquet(world, details):
    copy = world["copy"]
    con = duckdb.connect(str(copy), read_only=True)
    try:
        published = con.execute("select * from pair_details").df()
        (note,) = con.execute(
            "select published from publish.relations where relation_name = 'pair_details'"
        ).fetchone()
    finally:
        con.close()
    # one file per model, read as one relation
    files = copy.parent / "ableaudit" / "parquet" / "pair_details"
    assert parquet_glob(copy, "pair_details") == f"{files}/*.parquet"
    parquet = duckdb.sql(f"select * from read_parquet('{files}/*.parquet')").df()
    assert note is True
    for frame in (published, parquet):
        assert list(frame.columns) == list(details.columns)
        assert sorted(frame.pair_id) == sorted(details.pair_id)
    merged = parquet.merge(details, on="pair_id", suffixes=("_p", "_l"))
    np.testing.assert_allclose(
        merged.vader_delta_p.astype(float), merged.vader_delta_l.astype(float), equal_nan=True
    )
