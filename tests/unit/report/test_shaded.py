"""The shaded tables' rule: a domain or disability cell is shaded only where its interval lies
wholly above or below its model's overall rate (the mart's vs_overall, placed by SQL and tested
in degradation.yml); an overall cell is the reference and is never shaded."""

from __future__ import annotations

import itertools

import duckdb
import pytest
from statsmodels.stats.proportion import proportion_confint

from ableaudit.report import format as fmt
from ableaudit.report.marts import Marts
from ableaudit.report.pages.shaded import shaded_tables
from ableaudit.report.records import Table
from ableaudit.report.tables import Context

KEY = "('text', 'm', 'baseline', 'ableaudit', {metric!r}, {slice!r}, {value!r}, {n}, {x}, {low}, {high}, {method!r}, {vs})"


def _row(metric, slice_, value, x, n, vs=None, method="wilson"):
    low, high = proportion_confint(x, n, alpha=0.05, method="wilson")
    return KEY.format(
        metric=metric,
        slice=slice_,
        value=value,
        n=n,
        x=x,
        low=100 * low,
        high=100 * high,
        method=method,
        vs="null" if vs is None else repr(vs),
    )


def _marts(path, rows, *statements):
    """A warehouse holding degradation ``rows``, no judge's rows (the shaded tables show the
    metrics alone) and whatever ``statements`` add."""
    con = duckdb.connect(str(path))
    con.execute(
        f"create table degradation as select *, 100.0 * n_degraded / n_pairs as degradation_pct "
        f"from (values {', '.join(rows)}) t(task, model_id, arm, query_set, metric, slice, "
        "slice_value, n_pairs, n_degraded, rate_ci_low_pct, rate_ci_high_pct, rate_ci_method, vs_overall)"
    )
    con.execute(
        "create table interpretive_shift (task varchar, query_set varchar, model_id varchar, "
        "arm varchar, judge_name varchar, dimension varchar, slice varchar, slice_value varchar)"
    )
    for sql in statements:
        con.execute(sql)
    con.close()


@pytest.fixture
def section(tmp_path):
    path = tmp_path / "copy.duckdb"
    rows = [
        # 2 of 12 (16.7 %, [4.7, 44.8]) and 0 of 12 ([0, 24.2]) both contain the overall 8.3 %
        _row("vader", "overall", "all", 2, 24, method="wilson_design_effect"),
        _row("vader", "disability", "vision", 2, 12, "within"),
        _row("vader", "disability", "hearing", 0, 12, "within"),
        # 30 of 40 lies wholly above an overall 30 %, 0 of 40 wholly below it
        _row("verbosity", "overall", "all", 30, 100, method="wilson_design_effect"),
        _row("verbosity", "disability", "vision", 30, 40, "above"),
        _row("verbosity", "disability", "hearing", 0, 40, "below"),
        _row("verbosity", "disability", "speech", 0, 20, "within"),
    ]
    _marts(path, rows)
    marts = Marts(path)
    try:
        yield shaded_tables(
            Context(marts, lambda *a, **k: None, (f"c{i}" for i in itertools.count()))
        )
    finally:
        marts.close()


def _cells(section, metric):
    """{(column): cell} of a metric's row in the model's table (one table per model and family)."""
    (table,) = [b for b in section.blocks if isinstance(b, Table) and b.caption.startswith("m, ")]
    row = next(r for r in table.rows if r[0].text == metric)
    return table, dict(zip(table.columns[2:], row[2:], strict=True))


def test_two_of_twelve_and_none_of_twelve_are_shaded_alike(section):
    table, cells = _cells(section, "vader")
    vision, hearing = cells["vision"], cells["hearing"]
    assert (vision.text, hearing.text) == ("16.7", "0.0")
    assert [m[1] for m in vision.more] == ["12", "[4.7, 44.8]"]
    assert [m[1] for m in hearing.more] == ["12", "[0.0, 24.2]"]
    assert vision.shade == hearing.shade is None and vision.note == hearing.note is None
    assert table.scale == "support" and table.legend == fmt.SUPPORT_LEGEND
    assert "Wilson's (each query gives one pair)" in table.note


def test_only_an_interval_that_separates_from_the_overall_rate_is_shaded(section):
    _, cells = _cells(section, "verbosity")
    above, below, within = cells["vision"], cells["hearing"], cells["speech"]
    assert above.shade == fmt.support_colour("above") and above.note == "above"
    assert below.shade == fmt.support_colour("below") and below.note == "below"
    assert within.shade is None and within.note is None
    # darker means above: the shade's luminance orders the three, and the text keeps AA contrast
    assert fmt.contrast(above.shade, "#ffffff") > fmt.contrast(below.shade, "#ffffff")
    for cell in (above, below):
        assert fmt.contrast(cell.shade, cell.ink) >= 4.5
    assert "wholly above the model's overall rate" in above.link_label


def test_the_overall_rates_are_the_unshaded_reference(section):
    table, cells = _cells(section, "vader")
    overall = cells["All pairs"]
    assert overall.shade is None and overall.text == "8.3"
    assert "at the effective number of pairs" in table.note


def test_one_table_per_model_and_family_whose_links_name_the_metric_and_outcome(tmp_path):
    """Both metrics share one table (one family: neither is a registered scorer here), a row
    each, a column for all pairs and each disability; each cell's link filters its model's
    pairs to the slice, the metric and the degraded outcome."""
    path = tmp_path / "copy.duckdb"
    _marts(
        path,
        [
            _row("vader", "overall", "all", 1, 4),
            _row("vader", "disability", "genetic_developmental", 1, 4, "within"),
        ],
        "create table stg_seeds__disabilities as select 'genetic_developmental' as disability_id, "
        "'Genetic and developmental disorders' as display_name, 6 as sort_order",
        "create table stg_seeds__metrics as select 'vader' as metric, 'VADER sentiment' as display_name",
        "create table stg_registry__scorers as select 'vader' as metric, "
        "'response_scores_vader' as score_model",
    )
    marts = Marts(path)
    links = []
    try:
        ctx = Context(
            marts,
            lambda *a, **k: links.append((a, k)) or "evidence/x.html",
            (f"c{i}" for i in itertools.count()),
        )
        section = shaded_tables(ctx)
    finally:
        marts.close()
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    assert table.caption.startswith("m, scores of each answer:")
    assert table.columns == ["Metric", "Arm", "All pairs", "Genetic and developmental disorders"]
    assert table.column_ids[3] == "genetic_developmental"
    assert [(c.text, c.title) for c in table.rows[0][:2]] == [
        ("VADER sentiment", "vader"),
        ("baseline", None),
    ]
    assert links[-1] == (
        ("text", "ableaudit", "m"),
        {
            "arm": "baseline",
            "disability": "genetic_developmental",
            "metric": "vader",
            "outcome": "degraded",
        },
    )
