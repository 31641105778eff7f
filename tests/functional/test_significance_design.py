"""An audit of a local OpenAI-compatible server (tests.fixtures.openai_server), built end to end:
each neutral answer is shared by nine pairs, and no slice of `significance`, the headline or the
report calls a shift significant beside an interval that contains 0; no rate of `degradation`
is placed above or below its model's overall rate (what the report's shading follows) by an
interval that contains it, and the pooled slices' intervals count each query once."""

from __future__ import annotations

import duckdb
import pytest

from ableaudit.cli.main import main
from ableaudit.report.headline_table import headline_rows
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer


@pytest.mark.slow
def test_no_slice_is_significant_beside_an_interval_that_contains_zero(tmp_path, capsys):
    server = FakeOpenAIServer()
    wh = tmp_path / "wh.duckdb"
    try:
        argv = ["audit", "--model", SERVED_ID, "--base-url", server.base_url, "--subset", "2"]
        code = main([*argv, "--warehouse", str(wh)])
        assert code == 0, capsys.readouterr().err
    finally:
        server.close()
    con = duckdb.connect(str(wh), read_only=True)
    try:
        shared = con.execute(
            "select count(*) as n from int_pairs group by neutral_generation_id"
        ).fetchall()
        sig = con.execute("select * from significance").df()
        deg = con.execute("select * from degradation where n_pairs > 0").df()
    finally:
        con.close()
    assert {n for (n,) in shared} == {9}  # the design: one neutral answer, nine pairs
    overall = sig[sig.slice == "overall"]
    assert len(overall) and (overall.n_pairs == 9 * overall.n_clusters).all()
    called = sig[sig.significant]
    assert ((called.ci_low > 0) | (called.ci_high < 0)).all(), called
    assert (called.p_holm < 0.05).all()
    spans_zero = sig[(sig.ci_low <= 0) & (sig.ci_high >= 0)]
    assert not spans_zero.significant.any()
    # the papers' test over pairs calls domain slices of two queries (18 pairs) what the query
    # level does not: the pairs of one neutral answer are not eighteen independent draws
    naive = sig[(sig.slice == "domain") & (sig.paper_t_p < 0.05) & ~sig.significant]
    assert len(naive) and (naive.n_clusters == 2).all()
    assert (naive.p_holm.isna() | (naive.p_holm >= 0.05)).all()
    # the rates: a slice is told apart from its model's overall rate only by an interval that
    # leaves it, and the slices that pool a neutral answer's nine pairs count each query once
    overall_rate = (
        deg[deg.slice == "overall"].set_index(["model_id", "arm", "metric"]).degradation_pct
    )
    cells = deg[deg.slice != "overall"].join(
        overall_rate.rename("overall_pct"), on=["model_id", "arm", "metric"]
    )
    told = cells[cells.vs_overall.isin(["above", "below"])]
    assert (
        len(told)
        and (
            (told.rate_ci_low_pct > told.overall_pct) | (told.rate_ci_high_pct < told.overall_pct)
        ).all()
    ), told
    contains = cells[
        (cells.rate_ci_low_pct <= cells.overall_pct) & (cells.overall_pct <= cells.rate_ci_high_pct)
    ]
    assert len(contains) and (contains.vs_overall == "within").all()
    pooled = deg[deg.slice.isin(["overall", "domain"])]
    assert (pooled.rate_ci_method == "wilson_design_effect").all()
    assert (deg[deg.slice == "disability"].rate_ci_method == "wilson").all()
    assert (pooled.rate_ci_low_pct <= pooled.degradation_ci_low_pct + 1e-9).all()
    assert (pooled.rate_ci_high_pct >= pooled.degradation_ci_high_pct - 1e-9).all()
    # the headline prints the mart's verdict
    for model, arm, metric, *_, called_text in headline_rows(wh):
        row = overall[
            (overall.model_id == model) & (overall.arm == arm) & (overall.metric == metric)
        ]
        if len(row):
            assert called_text == ("yes" if bool(row.significant.iloc[0]) else "no"), metric
    # the masked scorers are metrics like the others: the echoed prompts differ from the neutral
    # one by the disability phrase, which moves VADER and, masked, moves it no more
    with duckdb.connect(str(wh), read_only=True) as con:
        rates = (
            con.execute(
                "select metric, n_pairs, n_excluded from degradation where slice = 'overall'"
            )
            .df()
            .set_index("metric")
        )
        shifts = con.execute(
            "select count(*) filter (where vader_delta != 0), "
            "count(*) filter (where vader_masked_delta != 0), count(*) from pair_details"
        ).fetchone()
    n_pairs = rates.loc["vader", "n_pairs"]
    assert rates.loc["vader_masked", "n_pairs"] == n_pairs == shifts[2] > 0
    assert rates.loc["regard_masked", "n_excluded"] == n_pairs  # no classifier here: unavailable
    assert shifts[0] > 0 and shifts[1] == 0, shifts
