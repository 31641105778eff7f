"""dbt build end to end on a temporary warehouse, checked against pandas.

Synthetic rows are landed in raw.generations with plain SQL; the marts must
equal an independent computation (pairs in pandas, VADER through vaderSentiment,
Regard through a manual softmax), incomplete pairs must be counted in
data_quality and not in rates, and a rebuild must score only what is new.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import textstat
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.dbt.runner import DbtError, run_dbt
from ableaudit.scorers.pair_registry import registered_pairs
from ableaudit.scorers.registry import LONG_MODEL, MASKED_MODEL, registered
from ableaudit.warehouse import connect
from ableaudit.warehouse.publish import mart_names, parquet_glob, publish
from tests.fixtures.warehouse import (
    independent_degradation,
    land,
    make_tiny_regard_classifier,
    manual_regard,
    read,
    response,
    synthetic_generations,
)

pytestmark = [pytest.mark.slow, pytest.mark.dbt_data_tests, pytest.mark.usefixtures("dbt_env")]
_VADER = SentimentIntensityAnalyzer()
KEY = ["model_id", "arm", "slice", "slice_value"]


def vader(text: str) -> float:
    return _VADER.polarity_scores(text)["compound"]


def words(text: str) -> int:
    return len(text.split())


def flesch(text: str) -> float:
    return textstat.flesch_reading_ease(text)


def fresh_warehouse(path: Path, rows: list[dict]) -> Path:
    connect(path).close()  # creates the raw layer
    land(path, rows)
    return path


@pytest.fixture(scope="module")
def built(dbt_env, tmp_path_factory) -> Path:
    """A warehouse with the synthetic rows, built once (Regard unavailable)."""
    wh = fresh_warehouse(
        tmp_path_factory.mktemp("built") / "ableaudit.duckdb", synthetic_generations()
    )
    run_dbt(["seed"], wh)
    run_dbt(["build"], wh)
    return wh


def compare(expected: pd.DataFrame, got: pd.DataFrame) -> None:
    merged = expected.merge(got, on=KEY, how="outer", suffixes=("_exp", "_got"), indicator=True)
    assert (merged._merge == "both").all(), merged[merged._merge != "both"][KEY + ["_merge"]]
    for col in ("n_pairs", "n_degraded", "n_excluded"):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), merged[
            merged[f"{col}_exp"] != merged[f"{col}_got"]
        ]
    np.testing.assert_allclose(
        merged.degradation_pct_got.astype(float),
        merged.degradation_pct_exp.astype(float),
        atol=1e-9,
    )


def mart(wh: Path, metric: str) -> pd.DataFrame:
    return read(
        wh,
        "select model_id, arm, slice, slice_value, n_pairs, n_degraded, n_excluded, degradation_pct, threshold "
        f"from degradation where metric = '{metric}' and task = 'text' and query_set = 'ableaudit'",
    )


@pytest.mark.parametrize(
    "metric,scorer,higher",
    [("vader", vader, True), ("verbosity", words, False), ("readability", flesch, True)],
)
def test_degradation_equals_an_independent_computation(built, metric, scorer, higher):
    generations = read(built, "select * from raw.generations")
    expected = independent_degradation(generations, scorer, higher, threshold=0.05)
    got = mart(built, metric)
    assert (got.threshold == 0.05).all()
    assert set(got.slice) == {"overall", "domain", "disability", "domain_disability"}
    compare(expected, got)
    assert (expected.n_degraded > 0).any() and (
        expected.n_degraded < expected.n_pairs
    ).any()  # data is not degenerate


@pytest.mark.long
def test_threshold_override_via_vars(built, tmp_path):
    wh = tmp_path / "ableaudit.duckdb"
    shutil.copy(built, wh)
    run_dbt(["build", "--select", "int_pair_scores+", "--vars", "{degradation_threshold: 0.2}"], wh)
    generations = read(wh, "select * from raw.generations")
    for metric, scorer, higher in [("vader", vader, True), ("verbosity", words, False)]:
        got = mart(wh, metric)
        assert (got.threshold == 0.2).all()
        compare(independent_degradation(generations, scorer, higher, threshold=0.2), got)
    # a stricter threshold never finds more degradation
    strict = mart(wh, "vader").set_index(KEY).n_degraded
    loose = mart(built, "vader").set_index(KEY).n_degraded
    assert (strict <= loose.reindex(strict.index)).all() and strict.sum() < loose.sum()


def test_incomplete_pairs_are_counted_in_data_quality_not_in_rates(built):
    pairs = read(built, "select * from int_pairs")
    statuses = set(pairs.pair_status)
    assert {
        "complete",
        "missing_neutral",
        "neutral_error",
        "disability_error",
        "disability_empty",
    } <= statuses
    n_disability = read(
        built, "select count(*) as n from raw.generations where condition = 'disability'"
    ).n[0]
    assert len(pairs) == n_disability  # every disability-aware generation is a pair row

    dq = read(built, "select * from data_quality")
    pair_dq = dq[dq.area == "pair"].groupby("status").n_rows.sum()
    assert pair_dq.to_dict() == pairs.pair_status.value_counts().to_dict()
    gen_dq = dq[dq.area == "generation"].groupby("status").n_rows.sum()
    raw_status = read(built, "select status, count(*) as n from raw.generations group by status")
    assert gen_dq.to_dict() == dict(zip(raw_status.status, raw_status.n))

    rate = dq[(dq.area == "rate") & (dq.metric == "vader")].groupby("status").n_rows.sum()
    assert rate["included"] == (pairs.pair_status == "complete").sum()
    assert rate.drop("included").sum() == (pairs.pair_status != "complete").sum()
    overall = mart(built, "vader").query("slice == 'overall'")
    assert (
        overall.n_pairs.sum() == rate["included"]
        and overall.n_excluded.sum() == rate.drop("included").sum()
    )


def test_regard_unavailable_is_counted_never_scored(built):
    scores = read(built, "select * from int_generation_scores where metric = 'regard'")
    with_text = scores[scores.text_hash.notna()]
    assert with_text.score.isna().all() and (with_text.score_status == "unavailable").all()
    assert "no-regard-model-here" in with_text.score_reason.iloc[0]
    regard = mart(built, "regard")
    assert (
        (regard.n_pairs == 0).all()
        and regard.degradation_pct.isna().all()
        and (regard.n_excluded > 0).all()
    )
    dq = read(built, "select * from data_quality where area = 'score' and metric = 'regard'")
    assert dq.groupby("status").n_rows.sum()["unavailable"] == len(with_text)


def test_each_text_is_scored_once(built):
    distinct = read(built, "select count(distinct response_text) as n from raw.generations").n[0]
    for table in ("response_scores_vader", "response_scores_verbosity", "response_scores_regard"):
        assert read(built, f"select count(*) as n from {table}").n[0] == distinct, table
    long = read(built, f"select scorer, count(*) as n from {LONG_MODEL} group by scorer")
    in_long = {name for name, entry in registered().items() if entry.model == LONG_MODEL}
    assert dict(zip(long.scorer, long.n, strict=True)) == dict.fromkeys(in_long, distinct)


def test_the_registry_is_the_one_source_of_the_scorers_metrics(built):
    """Every registered metric (per-text and pair scorers), and nothing else but the seed's
    judge_score, is a metric of the warehouse, with its declared direction, and has scores
    and pair_details columns."""
    declared = {name: e.metric for name, e in registered().items() if e.metric}
    paired = {name: e.metric for name, e in registered_pairs().items()}
    metrics = read(built, "select * from stg_seeds__metrics").set_index("metric")
    assert set(metrics.index) == set(declared) | set(paired) | {"judge_score"}
    for name, metric in (declared | paired).items():
        row = metrics.loc[name]
        assert (row.direction, row.display_name, row.truncated_pairs) == (
            metric.direction,
            metric.display_name,
            metric.truncated_pairs,
        )
    scored = read(
        built,
        "select distinct metric from int_generation_scores where not metric like 'judge_score:%'",
    )
    masked = read(built, "select distinct metric from int_generation_masked_scores")
    assert set(scored.metric) == {n for n in declared if registered()[n].model != MASKED_MODEL}
    assert set(masked.metric) == {n for n in declared if registered()[n].model == MASKED_MODEL}
    assert {"vader_masked", "regard_masked"} <= set(masked.metric)
    columns = set(read(built, "select * from pair_details limit 0").columns)
    assert {f"neutral_{name}" for name in declared | paired} <= columns
    assert {f"{name}_degraded" for name in declared | paired} <= columns
    pair_rows = read(built, "select distinct metric from int_pair_scores")
    assert set(paired) <= set(pair_rows.metric)


def test_publish_makes_a_read_only_copy_and_parquet(built, tmp_path):
    out = publish(built, tmp_path / "published")
    assert out == tmp_path / "published" / "ableaudit.duckdb"
    code = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); "
        "print(c.execute(\"select count(*) from degradation where slice = 'overall'\").fetchone()[0], "
        "c.execute('select count(*) from stg_raw__generations').fetchone()[0], "
        "c.execute('select count(*) from duckdb_views() where not internal').fetchone()[0])"
    )
    # a fresh interpreter with no project code on its path (-I), as a BI tool would be
    res = subprocess.run(
        [sys.executable, "-I", "-c", code, str(out)], capture_output=True, text=True, check=True
    )
    n_overall, n_generations, n_views = map(int, res.stdout.split())
    assert n_overall == len(read(built, "select * from degradation where slice = 'overall'")) > 0
    assert n_generations == len(synthetic_generations())
    assert n_views == 0  # stg_raw__generations, a view in the warehouse, is a table in the copy
    for name in mart_names():
        files = parquet_glob(tmp_path / "published" / "ableaudit.duckdb", name)
        ((n_rows,),) = duckdb.sql(f"select count(*) from read_parquet('{files}')").fetchall()
        assert n_rows == len(read(built, f"select * from {name}")), name
    models = read(built, "select distinct model_id from pair_details")
    assert len(models) > 1 and parquet_glob(out, "pair_details").endswith("/*.parquet")
    assert {"degradation", "data_quality"} <= set(mart_names())
    assert not list((tmp_path / "published").rglob(".*tmp*"))  # temp files were moved into place
    publish(built, tmp_path / "published")  # republishing replaces the copy


def test_failing_dbt_raises_naming_the_node(built, tmp_path):
    wh = tmp_path / "ableaudit.duckdb"
    shutil.copy(built, wh)
    con = duckdb.connect(str(wh))
    con.execute(
        "update raw.generations set status = 'weird' where generation_id = (select min(generation_id) from raw.generations)"
    )
    con.close()
    with pytest.raises(DbtError, match="row_checks_stg_raw__generations") as err:
        run_dbt(["build", "--select", "stg_raw__generations"], wh)
    assert isinstance(err.value, RuntimeError) and str(wh) in str(err.value)
    assert "broken: status in ('ok', 'empty', 'error') (1 row)" in str(err.value)


# the scorers, the marts the regard test reads and everything upstream of them (with their tests)
BUILD_SCORES = [
    "build",
    "--select",
    "+degradation",
    "+data_quality",
    "response_scores_vader",
    "response_scores_verbosity",
]


@pytest.mark.long
def test_regard_retry_then_scored_and_rebuild_scores_only_new_texts(tmp_path, monkeypatch):
    model_dir = tmp_path / "regard-model"
    monkeypatch.setenv("ABLEAUDIT_REGARD_MODEL", str(model_dir))
    wh = fresh_warehouse(tmp_path / "ableaudit.duckdb", synthetic_generations(seed=1))

    # 1. classifier missing: every text is 'unavailable'
    run_dbt(BUILD_SCORES, wh)
    first = read(wh, "select * from response_scores_regard")
    assert (first.status == "unavailable").all() and first.regard.isna().all()
    assert first.reason.nunique() == 1 and "no such local folder" in first.reason.iloc[0]

    # 1b. still missing: the rebuild checks once and rewrites none of the unavailable rows
    run_dbt(["build", "--select", "response_scores_regard"], wh)
    again = read(wh, "select text_hash, reason, scored_at from response_scores_regard")
    kept = again.merge(first, on="text_hash", suffixes=("", "_before"))
    assert len(kept) == len(first) == len(again)
    assert (kept.scored_at == kept.scored_at_before).all() and (
        kept.reason == kept.reason_before
    ).all()

    # 2. the same classifier reference now exists: the unavailable texts are retried
    make_tiny_regard_classifier(model_dir, max_positions=32)
    run_dbt(BUILD_SCORES, wh)
    second = read(wh, "select * from response_scores_regard")
    assert len(second) == len(first) and set(second.status) == {"ok", "truncated"}
    texts = read(
        wh,
        "select distinct text_hash, response_text from stg_raw__generations where response_text is not null",
    )
    manual = manual_regard(model_dir, list(texts.response_text))
    merged = second.merge(texts, on="text_hash")
    assert len(merged) == len(texts)
    np.testing.assert_allclose(
        merged.regard, [manual[t][0] for t in merged.response_text], atol=1e-6
    )
    assert (
        (merged.status == "truncated") == [manual[t][1] > 32 for t in merged.response_text]
    ).all()
    assert (merged.status == "truncated").any() and (merged.status == "ok").any()

    generations = read(wh, "select * from raw.generations")
    got = mart(wh, "regard")
    compare(independent_degradation(generations, lambda t: manual[t][0], True, threshold=0.05), got)
    dq = read(
        wh,
        "select status, sum(n_rows) as n from data_quality where area = 'score' and metric = 'regard' group by status",
    )
    assert (
        dict(zip(dq.status, dq.n))["truncated"]
        == merged.merge(generations[["response_text"]], on="response_text")
        .query("status == 'truncated'")
        .shape[0]
    )

    # 3. three new generations: a rebuild scores exactly their three texts, nothing else
    before = {
        t: read(wh, f"select text_hash, scored_at from {t}")
        for t in ("response_scores_vader", "response_scores_verbosity", "response_scores_regard")
    }
    rng = random.Random(42)
    new_rows = []
    for i, row in enumerate(
        r for r in synthetic_generations(seed=1) if r["condition"] == "disability"
    ):
        if i == 3:
            break
        new_rows.append(
            dict(
                row,
                generation_id=f"new-{i}",
                sample_index=1,
                status="ok",
                response_text=f"brand new answer {i}: " + response(rng),
                error_message=None,
            )
        )
    land(wh, new_rows)
    run_dbt(BUILD_SCORES, wh)
    for table, old in before.items():
        now = read(wh, f"select text_hash, scored_at from {table}")
        assert len(now) == len(old) + 3, table
        merged = now.merge(old, on="text_hash", how="left", suffixes=("", "_before"))
        rescored = merged[merged.scored_at != merged.scored_at_before]
        assert len(rescored) == 3 and rescored.scored_at_before.isna().all(), (table, rescored)
