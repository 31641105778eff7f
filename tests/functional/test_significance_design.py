"""An audit of a local OpenAI-compatible server (tests.fixtures.openai_server), built end to end:
each neutral answer is shared by nine pairs, and no slice of `significance`, the headline or the
report calls a shift significant beside an interval that contains 0."""

from __future__ import annotations

import duckdb
import pytest

from ableaudit.cli.headline import headline_rows
from ableaudit.cli.main import main
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
    # the headline prints the mart's verdict
    for model, arm, metric, *_, called_text in headline_rows(wh):
        row = overall[
            (overall.model_id == model) & (overall.arm == arm) & (overall.metric == metric)
        ]
        if len(row):
            assert called_text == ("yes" if bool(row.significant.iloc[0]) else "no"), metric
