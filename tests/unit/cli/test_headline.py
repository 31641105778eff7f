"""The terminal headline prints the marts' own figures, aligned, with 'n/a' for what is undefined."""

from __future__ import annotations

import duckdb

from ableaudit.report.headline_table import categories, category_rows, headline, headline_rows


def _marts(path):
    con = duckdb.connect(str(path))
    con.execute(
        "create table degradation as select * from (values "
        "('text', 'm1', 'baseline', 'ableaudit', 'vader', 'overall', 12, 41.66666, 'x', 19.33, 68.04), "
        "('text', 'm1', 'baseline', 'ableaudit', 'regard', 'overall', 0, null, 'x', null, null), "
        "('text', 'm1', 'baseline', 'ableaudit', 'vader', 'domain', 5, 20.0, 'x', 3.6, 62.4), "
        "('text', 'm1', 'baseline', 'ableaudit', 'verbosity', 'overall', 54, 31.5, 'x', 14.96, 54.1)) "
        "t(task, model_id, arm, query_set, metric, slice, n_pairs, degradation_pct, slice_value, "
        "rate_ci_low_pct, rate_ci_high_pct)"
    )
    con.execute(
        "create table heterogeneity as select * from (values "
        "('text', 'm1', 'baseline', 'vader', 'disability', 6, 0.0123, 'vision', 50.0, 'hearing', 0.0, "
        "50.0, 12.5, 83.3, 41.07), "
        "('text', 'm1', 'baseline', 'vader', 'domain', 6, 0.5, 'finance', 30.0, 'media', 10.0, "
        "20.0, -5.0, 40.0, 30.0), "
        "('text', 'm1', 'baseline', 'verbosity', 'disability', 6, null, 'hearing', 0.0, 'hearing', 0.0, "
        "0.0, 0.0, 0.0, null)) "
        "t(task, model_id, arm, metric, factor, n_clusters, p_value, worst_level, worst_pct, best_level, "
        "best_pct, gap_pct, gap_ci_low, gap_ci_high, min_detectable_gap_pct)"
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
        (
            "m1",
            "baseline",
            "vader",
            "12",
            "41.7 [19.3, 68.0]",
            "-0.123 [-0.200, -0.010]",
            "0.031",
            "yes",
        ),
        # the mart's own verdict is printed, not one re-derived from a p beside it
        (
            "m1",
            "baseline",
            "verbosity",
            "54",
            "31.5 [15.0, 54.1]",
            "+15.400 [-3.360, 34.280]",
            "0.036",
            "no",
        ),
    ]
    text = headline(wh).splitlines()
    assert (
        text[0].startswith("model")
        and len({len(line.rstrip()) <= len(text[1]) for line in text}) == 1
    )


def test_the_masked_variant_is_printed_beside_its_scorer(tmp_path):
    wh = tmp_path / "copy.duckdb"
    _marts(wh)
    assert headline(wh).splitlines()[-1].startswith("m1")  # no scorer_bias: no masked block
    con = duckdb.connect(str(wh))
    con.execute(
        "insert into degradation values "
        "('text', 'm1', 'baseline', 'ableaudit', 'vader_masked', 'overall', 12, 8.33333, 'x', 1.5, 35.4), "
        "('text', 'm1', 'baseline', 'ableaudit', 'regard_masked', 'overall', 0, null, 'x', null, null)"
    )
    con.execute(
        "create table scorer_bias as select * from (values ('vader', 'vader_masked', 'vision'), "
        "('vader', 'vader_masked', 'learning'), ('regard', 'regard_masked', 'vision')) "
        "t(scorer, masked_scorer, disability_id)"
    )
    con.close()
    lines = headline(wh).splitlines()
    block = lines[lines.index("") + 1 :]
    assert block[0].startswith("Masked beside unmasked")
    # regard: no rate on either side (its classifier did not load), so no row
    assert [line.split() for line in block[3:]] == [
        # 41.7 % degraded, 8.3 % once the words are masked: 33.3 points from the words
        ["m1", "baseline", "vader", "41.7", "vader_masked", "8.3", "+33.3"],
    ]


def test_categories_block_reads_the_disability_rows_of_heterogeneity(tmp_path):
    wh = tmp_path / "copy.duckdb"
    _marts(wh)
    assert category_rows(wh) == [
        (
            "m1",
            "baseline",
            "vader",
            "6",
            "0.012",
            "vision (50.0)",
            "hearing (0.0)",
            "50.0 [12.5, 83.3]",
            "41.1",
        ),
        (
            "m1",
            "baseline",
            "verbosity",
            "6",
            "n/a",
            "hearing (0.0)",
            "hearing (0.0)",
            "0.0 [0.0, 0.0]",
            "n/a",
        ),
    ]
    text = categories(wh).splitlines()
    assert text[0].startswith("Do the disability categories differ?") and text[2].startswith(
        "model"
    )


def test_an_unavailable_scorer_says_how_to_enable_it(tmp_path):
    wh = tmp_path / "copy.duckdb"
    _marts(wh)
    con = duckdb.connect(str(wh))
    con.execute(
        "create table data_quality as select * from (values "
        "('r1', 'score', 'regard', 'unavailable', 70), ('r2', 'score', 'regard', 'unavailable', 50), "
        "('r1', 'score', 'vader', 'ok', 120), ('r1', 'pair', null, 'unavailable', 9)) "
        "t(run_id, area, metric, status, n_rows)"
    )
    con.close()
    lines = headline(wh).splitlines()
    assert lines[0].startswith("model") and len(lines) == 2 + 3 + 1
    note = lines[-1]
    assert note.startswith("regard: n/a, 120 answers unscored: ")
    assert "ABLEAUDIT_ALLOW_DOWNLOAD=1 ableaudit build" in note
    assert "ABLEAUDIT_REGARD_MODEL" in note
    assert sum("unscored" in line for line in lines) == 1


def test_the_audit_summary_keeps_the_rows_where_the_categories_differ(tmp_path):
    wh = tmp_path / "copy.duckdb"
    _marts(wh)
    text = categories(wh, only_differing=True).splitlines()
    assert text[0].startswith("Do the disability categories differ?")
    rows = [line for line in text if line.startswith("m1")]
    assert [r.split()[2] for r in rows] == ["vader"]  # p 0.012; verbosity has no test
    assert text[-1].startswith("1 other model, arm and metric row(s): no evidence")
    assert categories(wh, only_differing=True, alpha=0.01).startswith(
        "Do the disability categories differ? 2 other"
    )
