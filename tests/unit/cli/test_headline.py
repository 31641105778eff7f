"""The terminal headline prints the marts' own figures, aligned, with 'n/a' for what is undefined."""

from __future__ import annotations

import duckdb

from ableaudit.cli.headline import headline, headline_rows


def _marts(path):
    con = duckdb.connect(str(path))
    con.execute(
        "create table degradation as select * from (values "
        "('text', 'm1', 'baseline', 'ableaudit', 'vader', 'overall', 12, 41.66666, 'x'), "
        "('text', 'm1', 'baseline', 'ableaudit', 'regard', 'overall', 0, null, 'x'), "
        "('text', 'm1', 'baseline', 'ableaudit', 'vader', 'domain', 5, 20.0, 'x'), "
        "('text', 'm1', 'baseline', 'ableaudit', 'verbosity', 'overall', 54, 31.5, 'x')) "
        "t(task, model_id, arm, query_set, metric, slice, n_pairs, degradation_pct, slice_value)"
    )
    con.execute(
        "create table significance as select * from (values "
        "('text', 'm1', 'baseline', 'ableaudit', 'vader', 'overall', -0.1234, -0.2, -0.01, 0.0312, true), "
        "('text', 'm1', 'baseline', 'ableaudit', 'verbosity', 'overall', 15.4, -3.36, 34.28, 0.036, false)) "
        "t(task, model_id, arm, query_set, metric, slice, mean_diff, ci_low, ci_high, p_holm, "
        "significant)"
    )
    con.close()


def test_headline_reads_the_overall_rows(tmp_path):
    wh = tmp_path / "copy.duckdb"
    _marts(wh)
    assert headline_rows(wh) == [
        ("m1", "baseline", "regard", "0", "n/a", "n/a", "n/a", "n/a"),
        ("m1", "baseline", "vader", "12", "41.7", "-0.123 [-0.200, -0.010]", "0.031", "yes"),
        # the mart's own verdict is printed, not one re-derived from a p beside it
        ("m1", "baseline", "verbosity", "54", "31.5", "+15.400 [-3.360, 34.280]", "0.036", "no"),
    ]
    text = headline(wh).splitlines()
    assert (
        text[0].startswith("model")
        and len({len(line.rstrip()) <= len(text[1]) for line in text}) == 1
    )
