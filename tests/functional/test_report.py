"""The HTML report, rendered from published copies of built warehouses.

Every figure the report prints carries the mart row and column it was read from
(``data-src``, ``data-col``, and ``data-k``: its key in the page's provenance list); these tests parse the pages
with the standard library's HTML parser and compare each printed figure with that
row, read here with plain DuckDB SQL. The worlds come from
tests/fixtures/report_world.py: a rich multi-model one and a one-model one.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote_plus

import duckdb
import pandas as pd
import pytest

from ableaudit.cli.main import main
from ableaudit.report import ReportError, render_report
from tests.fixtures.report_world import SPANS, TEXT_MODELS, VISION_MODELS

pytestmark = pytest.mark.slow

SECTIONS = [
    "headline",
    "shaded",
    "sensitivity",
    "scaling",
    "significance",
    "robustness",
    "vision",
    "mitigation",
    "assistive",
    "trust",
]


class Figures(HTMLParser):
    """Every element carrying data-src, with its text; numeric cells without one; links; sections; empties."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.figures: list[dict] = []
        self.unsourced: list[str] = []
        self.links: list[str] = []
        self.sections: list[str] = []
        self.empty: list[str] = []
        self.marks: list[str] = []
        self.keys: list[dict] = []
        self._open: list[dict] = []  # elements whose text is being collected

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "section" and a.get("id"):
            self.sections.append(a["id"])
        collect = None
        if "data-src" in a:
            collect = {"kind": "figure", **a}
        elif tag == "td" and "num" in (a.get("class") or "").split():
            collect = {"kind": "td", "outside": ""}
        elif tag == "p" and a.get("class") == "empty":
            collect = {"kind": "empty"}
        elif tag == "mark":
            collect = {"kind": "mark"}
        elif tag == "script" and a.get("id") == "provenance":
            collect = {"kind": "provenance"}
        if collect is not None:
            collect.update(tag=tag, text="")
            self._open.append(collect)

    def handle_data(self, data):
        for el in self._open:
            el["text"] += data
        figure_open = any(el["kind"] == "figure" for el in self._open)
        for el in self._open:
            if el["kind"] == "td" and not figure_open:
                el["outside"] += data  # text of a numeric cell that no source covers

    def handle_endtag(self, tag):
        if self._open and self._open[-1]["tag"] == tag:
            el = self._open.pop()
            if el["kind"] == "figure":
                self.figures.append(el)
            elif el["kind"] == "td" and re.search(r"\d", el["outside"]):
                self.unsourced.append(el["text"])
            elif el["kind"] == "empty":
                self.empty.append(el["text"])
            elif el["kind"] == "provenance":
                self.keys = json.loads(el["text"])
            elif el["kind"] == "mark":  # the quoted text, without the words read out around it
                self.marks.append(
                    re.sub(r"\[start of span [^\]]*\] | \[end of span\]", "", el["text"])
                )


def parse(path: Path) -> Figures:
    p = Figures()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def as_number(text: str) -> tuple[float | None, float, str]:
    """(value, tolerance from the decimals printed, kind) of a printed figure; None for 'n/a'."""
    t = text.strip().replace("\u2212", "-")
    if t == "n/a":
        return None, 0.0, "na"
    if t.startswith("<"):
        return float(t[1:].strip()), 0.0, "below"
    decimals = len(t.split(".")[1]) if "." in t else 0
    return float(t), 0.5 * 10 ** (-decimals) + 1e-9, "value"


def matches(printed: str, value) -> bool:
    got, tol, kind = as_number(printed)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return kind == "na"
    if kind == "na":
        return False
    if kind == "below":
        return float(value) < got
    return abs(float(value) - got) <= tol


class Warehouse:
    """The published copy, read with plain SQL: each relation once, rows looked up by key."""

    def __init__(self, path: Path) -> None:
        self.con = duckdb.connect(str(path), read_only=True)
        self.frames: dict[str, pd.DataFrame] = {}
        self.groups: dict[tuple, dict[tuple, pd.DataFrame]] = {}

    @staticmethod
    def _norm(value):
        return None if value is None or (isinstance(value, float) and math.isnan(value)) else value

    def rows(self, relation: str, key: dict) -> pd.DataFrame:
        """The rows whose columns equal the key's values (null matching null)."""
        if relation not in self.frames:
            self.frames[relation] = self.con.execute(f'select * from "{relation}"').df()
        frame = self.frames[relation]
        cols = tuple(sorted(key))
        if not cols:
            return frame
        if (relation, cols) not in self.groups:
            self.groups[(relation, cols)] = {
                tuple(self._norm(v) for v in (k if isinstance(k, tuple) else (k,))): g
                for k, g in frame.groupby(list(cols), dropna=False, sort=False)
            }
        return self.groups[(relation, cols)].get(
            tuple(self._norm(key[c]) for c in cols), frame.iloc[0:0]
        )


def check_figures(pages: list[Path], wh: Warehouse) -> dict[str, int]:
    """Compare every printed figure of the pages with its mart row; return how many were checked per relation."""
    checked: dict[str, int] = {}
    problems = []
    for page in pages:
        parsed = parse(page)
        assert not parsed.unsourced, (
            f"{page.name}: numbers printed without a source: {parsed.unsourced[:5]}"
        )
        for f in parsed.figures:
            key = parsed.keys[int(f["data-k"])]
            rows = wh.rows(f["data-src"], key)
            agg, col, text = f.get("data-agg"), f["data-col"], f["text"]
            if agg == "count":
                ok = matches(text, len(rows))
            elif agg:
                values = rows[col].dropna()
                assert len(rows), (page.name, f)
                if values.empty:
                    ok = matches(text, None)
                elif agg == "distinct":
                    ok = any(matches(text, v) for v in values.unique())
                else:
                    ok = matches(text, values.min() if agg == "min" else values.max())
            else:
                if len(rows) != 1:
                    problems.append((page.name, f["data-src"], key, f"{len(rows)} rows"))
                    continue
                row = rows.iloc[0]
                if "|" in col:  # an interval printed as [low, high]
                    low, high = col.split("|")
                    parts = text.strip("[]").split(",")
                    ok = matches(parts[0], row[low]) and matches(parts[1], row[high])
                else:
                    ok = matches(text, row[col])
            if not ok:
                problems.append((page.name, f["data-src"], col, key, text))
            checked[f["data-src"]] = checked.get(f["data-src"], 0) + 1
    assert not problems, problems[:10]
    return checked


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def rendered(report_world, tmp_path_factory):
    return render_report(report_world, tmp_path_factory.mktemp("report") / "out")


@pytest.fixture(scope="module")
def warehouse(report_world):
    wh = Warehouse(report_world)
    yield wh
    wh.con.close()


# --------------------------------------------------------------------------- tests


def test_every_section_renders_with_its_data_statement(rendered, report_world):
    assert rendered.source == report_world
    index = parse(rendered.index)
    assert index.sections == SECTIONS
    assert index.empty == [], "the rich world fills every section"
    html = rendered.index.read_text()
    assert html.count('class="data-statement"') == len(SECTIONS)
    for model in [*TEXT_MODELS, *VISION_MODELS]:
        assert model in html
    assert "Threshold</dt>" in html and "Judges</dt>" in html and "Runs</dt>" in html
    # a self-contained page: inline style and svg, a policy forbidding every request, no external address
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'' in html
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert html.count('<svg role="img"') >= 5 and "<title id=" in html and "<desc id=" in html


def test_every_printed_figure_equals_its_mart_row(rendered, warehouse):
    checked = check_figures(rendered.pages, warehouse)
    for relation in (
        "degradation",
        "significance",
        "threshold_sensitivity",
        "scaling",
        "robustness",
        "interpretive_shift",
        "group_bias",
        "mitigation_effect",
        "assistive_tech_mismatch_rates",
        "assistive_tech_mentions",
        "judgment_quality",
        "agreement",
        "annotator_agreement",
        "data_quality",
        "refusal_rates",
        "model_comparison",
        "heterogeneity",
        "scorer_bias",
        "int_model_sizes",
        "int_pair_scores",
        "int_pairs",
    ):
        assert checked.get(relation, 0) > 0, (relation, checked)


def test_the_assistive_technology_page_names_disabilities_and_technologies(rendered, warehouse):
    html = rendered.index.read_text()
    section = html[html.index('id="assistive"') : html.index('id="trust"')]
    rates = warehouse.rows("assistive_tech_mismatch_rates", {})
    names = warehouse.rows("stg_seeds__disabilities", {}).set_index("disability_id").display_name
    groups = set(rates.disability_group) - {"all"}
    assert groups and "All disabilities" in section
    for group in groups:
        assert f">{names[group]}<" in section, group
        assert f">{group}<" not in section, group  # never the id as a cell's text
    mentions = warehouse.rows("assistive_tech_mentions", {})
    for technology_id in set(mentions.technology_id):
        assert f">{technology_id}<" not in section and technology_id + "," not in section


def test_headline_has_one_row_per_model_arm_and_counted_metric(rendered, warehouse):
    html = rendered.index.read_text()
    headline = html[html.index('id="headline"') : html.index('id="shaded"')]
    keys = parse(rendered.index).keys
    printed = {
        tuple(sorted(keys[int(k)].items()))
        for k in re.findall(
            r'data-src="degradation" data-col="degradation_pct" data-k="(\d+)"', headline
        )
    }
    rows = warehouse.rows("degradation", {"slice": "overall"})
    counted = rows.groupby(["task", "query_set", "metric"]).n_pairs.transform("max") > 0
    expected = {
        tuple(
            sorted(
                {
                    k: r[k]
                    for k in [
                        "task",
                        "model_id",
                        "arm",
                        "query_set",
                        "metric",
                        "slice",
                        "slice_value",
                    ]
                }.items()
            )
        )
        for _, r in rows[counted].iterrows()
    }
    assert printed == expected
    # regard has no counted pair (no classifier): named, not silently dropped
    assert "No pair was counted for Regard" in headline


def test_a_rate_cell_is_shaded_only_where_its_interval_leaves_the_overall_rate(rendered, warehouse):
    """The shaded tables and the vision page: a cell's shade is that of its mart row's vs_overall
    ('above' dark, 'below' pale), never one for a cell whose interval contains its model's overall
    rate, and never for an overall cell (the reference)."""
    from ableaudit.report import format as fmt

    html = rendered.index.read_text()
    keys = parse(rendered.index).keys
    cell = re.compile(
        r'<td class="num( shaded)?"(?: style="background-color:(#[0-9a-f]{6});[^"]*")?>'
        r'(?:<a [^>]*>)?<span class="v" data-src="(degradation|interpretive_shift)" '
        r'data-col="(?:degradation_pct|yes_pct)" data-k="(\d+)"'
    )
    seen: dict[str, int] = {}
    for section in ("shaded", "vision"):
        start = html.index(f'id="{section}"')
        part = html[start : html.index("<section ", start)]
        for shaded, colour, relation, k in cell.findall(part):
            row = warehouse.rows(relation, keys[int(k)]).iloc[0]
            vs = None if row.slice == "overall" else row.vs_overall
            assert bool(shaded) == (colour != "") == (vs in ("above", "below")), (relation, row)
            if vs in ("above", "below"):
                assert colour == fmt.support_colour(vs)
                key = {**keys[int(k)], "slice": "overall", "slice_value": "all"}
                rate = "degradation_pct" if relation == "degradation" else "yes_pct"
                reference = warehouse.rows(relation, key).iloc[0][rate]
                if vs == "above":
                    assert row.rate_ci_low_pct > reference
                else:
                    assert row.rate_ci_high_pct < reference
            seen[str(vs)] = seen.get(str(vs), 0) + 1
    assert seen.get("within", 0) > 10 and seen.get("None", 0) > 0, seen


def test_every_shaded_cell_links_to_its_pairs(rendered):
    """A cell's link opens its model's pairs filtered to its slice, its metric and the outcome it
    counts: the pairs the metric finds degraded (or the judge labels Yes)."""
    index = parse(rendered.index)
    evidence = [h for h in index.links if h.startswith("evidence/")]
    assert len(evidence) > 100
    html = rendered.index.read_text()
    shaded = html[html.index('id="shaded"') : html.index('id="sensitivity"')]
    cells = set(re.findall(r'<a href="(evidence/[^"]*)"', shaded))
    assert cells and all("metric=" in h and "outcome=" in h for h in cells)
    root = rendered.index.parent
    pages = {}
    for href in evidence:
        path, _, fragment = href.partition("#")
        assert (root / path).is_file(), href
        text = pages.setdefault(path, (root / path).read_text())
        filters = dict(
            (name, unquote_plus(value))
            for name, value in re.findall(
                r"(arm|domain|disability|metric|outcome)=([^&]+)", fragment
            )
        )
        for name in ("arm", "domain", "disability"):
            if name in filters:
                assert f'data-{name}="{filters[name]}"' in text, (href, name)
        if "metric" in filters:
            assert filters["outcome"] in ("degraded", "yes"), href
            token = f"{filters['outcome']}:{filters['metric']}"
            assert f'<option value="{token}">' in text, (href, token)
    assert len(pages) == len(TEXT_MODELS) + len(VISION_MODELS)


def test_one_table_per_model_and_family_with_display_names(rendered, warehouse):
    """The shaded tables: per model one table per family of metrics (the registry's scores of each
    answer, its pair metrics, the judges' scores, the contrastive dimensions), a row per metric and
    arm, a column per disability and domain, each labelled by its display name with its id as hover
    text; one legend on the page."""
    from markupsafe import escape

    from ableaudit.report import format as fmt

    html = rendered.index.read_text()
    assert html.count(str(escape(fmt.SUPPORT_LEGEND))) == 1
    shaded = html[html.index('id="shaded"') : html.index('id="sensitivity"')]
    captions = re.findall(r"<caption[^>]*>([^<]*): rate in % over all pairs", shaded)
    con = warehouse.con
    answer = set(con.execute("select metric from stg_registry__scorers").df().metric.dropna())
    pair = set(con.execute("select metric from stg_registry__pair_scorers").df().metric)
    counted = con.execute(
        "select model_id, metric, base_metric from degradation join (select task, query_set, "
        "metric from degradation group by all having max(n_pairs) > 0) using (task, query_set, "
        "metric) where slice = 'overall'"
    ).df()
    expected = set()
    for r in counted.itertuples():
        family = (
            "judge scores"
            if r.base_metric == "judge_score"
            else "scores of each answer"
            if r.metric in answer
            else "pair metrics: similarity and parity"
            if r.metric in pair
            else "other metrics"
        )
        expected.add(f"{r.model_id}, {family}")
    for model in con.execute("select distinct model_id from interpretive_shift").df().model_id:
        expected.add(f"{model}, contrastive judge dimensions")
    assert len(captions) == len(set(captions)) == len(expected)
    assert set(captions) == expected
    headers = re.findall(r'<th scope="(?:col|row)"(?: title="([^"]*)")?>([^<]*)</th>', shaded)
    labels = {text for _, text in headers}
    disabilities = con.execute(
        "select disability_id, display_name from stg_seeds__disabilities where disability_id in "
        "(select slice_value from degradation where slice = 'disability')"
    ).df()
    assert len(disabilities) >= 4
    for r in disabilities.itertuples():
        assert (r.disability_id, r.display_name) in headers
        assert r.disability_id not in labels
    metrics = con.execute(
        "select metric, display_name from stg_seeds__metrics where display_name <> metric "
        "and metric in (select metric from degradation where n_pairs > 0)"
    ).df()
    assert len(metrics) >= 3
    for r in metrics.itertuples():
        assert (r.metric, r.display_name) in headers
        assert r.metric not in labels


def test_evidence_pages_show_pairs_side_by_side_with_quoted_spans(
    rendered, report_world, warehouse
):
    pages = [p for p in rendered.pages if p.parent.name == "evidence"]
    page = next(p for p in pages if "m-small" in p.name)
    parsed = parse(page)
    assert parsed.marks and set(parsed.marks) <= set(SPANS)
    html = page.read_text()
    assert html.count('<article class="pair"') == len(
        warehouse.rows("int_pairs", {"model_id": "m-small"})
    )
    for arm in ("baseline", "guardrail", "dpo"):
        assert f'<option value="{arm}">' in html
    assert "Neutral</h3>" in html and "Disability-aware</h3>" in html and "Judge j1" in html
    assert 'role="search"' in html and 'role="status"' in html


def test_at_most_max_pairs_per_arm_with_a_count_of_the_rest(report_world, tmp_path, warehouse):
    out = render_report(report_world, tmp_path / "small", max_pairs=5)
    page = next(p for p in out.pages if "m-small" in p.name)
    html = page.read_text()
    assert html.count('<article class="pair"') == 5 * 3
    for arm in ("baseline", "guardrail", "dpo"):
        total = len(warehouse.rows("int_pairs", {"model_id": "m-small", "arm": arm}))
        assert re.search(rf"Arm {arm}: 5 pairs shown of <span[^>]*>{total}</span> in all", html), (
            arm
        )
    disabilities = set(
        re.findall(
            r'<article class="pair"[^>]*data-arm="baseline" data-domain="[^"]*" '
            r'data-disability="([^"]*)"',
            html,
        )
    )
    assert len(disabilities) >= 4, "the sample spreads over the disability cells"


def test_one_model_warehouse_renders_and_says_what_is_missing(one_model_world, tmp_path):
    out = render_report(one_model_world, tmp_path / "one")
    index = parse(out.index)
    assert index.sections == SECTIONS
    empties = " ".join(index.empty)
    assert "No vision pairs were judged" in empties
    assert "mitigation arm" in empties
    wh = Warehouse(one_model_world)
    try:
        check_figures(out.pages, wh)
    finally:
        wh.con.close()
    assert [
        p.name for p in out.pages if p.parent.name == "evidence"
    ] and "m-solo" in out.index.read_text()


def test_cli_reads_the_published_copy_of_a_live_warehouse(report_world, tmp_path, capsys):
    live = report_world.parent.parent / report_world.name
    assert live.is_file() and report_world.parent.name == "published"
    assert main(["report", "--warehouse", str(live), "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert str(report_world) in out and (tmp_path / "cli" / "index.html").is_file()


def test_a_published_copy_alone_is_enough(report_world, tmp_path):
    lone = tmp_path / "elsewhere" / report_world.name
    lone.parent.mkdir()
    shutil.copy(report_world, lone)
    out = render_report(lone)
    assert out.index == lone.parent / lone.stem / "report" / "index.html" and out.source == lone
    assert len([p for p in out.pages if p.parent.name == "evidence"]) == len(TEXT_MODELS) + len(
        VISION_MODELS
    )


GATE_ROWS = """
    create or replace table gate_results as
    select * from (values
        ('max-vader', 'degradation_max', 'error', 'text', 'ableaudit', 'm-small', 'baseline',
         'run-2', 'vader overall=all', 81.8, 50.0, 70.1, 90.2, 44, 'fail', false,
         'max-vader: vader overall=all: 81.8% is above 50%', true),
        ('shift', 'interpretive_shift_max', 'warn', 'text', 'ableaudit', 'm-small', 'baseline',
         'run-2', 'judge interpret overall=all', 12.5, 20.0, null, null, 40, 'pass', true,
         'shift: Yes-rate 12.5% is within 20%', true),
        ('max-vader', 'degradation_max', 'error', 'text', 'ableaudit', 'm-small', 'baseline',
         'run-1', 'vader overall=all', 10.0, 50.0, 5.0, 20.0, 44, 'pass', true,
         'an earlier run, not shown', false)
    ) as t(rule_id, rule_kind, severity, task, query_set, model_id, arm, run_id, scope,
           observed, threshold, ci_low, ci_high, n_pairs, verdict, passed_for_gate,
           message, is_latest_run)
"""


def _copy_with(world: Path, folder: Path, sql: str) -> Path:
    """A copy of a built world in ``folder``, changed by ``sql``."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / world.name
    shutil.copy(world, copy)
    con = duckdb.connect(str(copy))
    try:
        con.execute(sql)
    finally:
        con.close()
    return copy


def gated_copy(world: Path, folder: Path) -> Path:
    """A copy of a built world whose gate_results holds verdicts (one blocking, one earlier run)."""
    return _copy_with(world, folder, GATE_ROWS)


RUN_ROWS = """
    insert into run_comparison by name
    select task, query_set, model_id, arm, metric, slice, slice_value,
        'run' as compared_by, c.comparison, c.baseline as baseline_cohort,
        c.candidate as candidate_cohort, c.baseline as baseline_run_id,
        c.candidate as candidate_run_id, 'r1' as baseline_revision, 'r1' as candidate_revision,
        n_pairs as n_units, n_pairs as n_baseline_pairs, n_pairs as n_candidate_pairs,
        true as paired, degradation_pct - c.step as baseline_rate,
        degradation_pct as candidate_rate, c.step as change, c.step - 4 as change_ci_low,
        c.step + 4 as change_ci_high, 0.01 as p_value, 'mcnemar_exact' as test,
        case when c.step > 4 then 'regressed' else 'unchanged' end as flag,
        'CI above 0: regressed' as flag_rule, null as reason
    from degradation, (values
        ('previous', 'run-a', 'run-b', 1.0),
        ('previous', 'run-b', 'run-c', 6.5),
        ('pinned', 'run-a', 'run-c', 7.5)
    ) as c(comparison, baseline, candidate, step)
    where task = 'text' and model_id = 'm-small' and arm = 'baseline' and n_pairs > 0
        and slice in ('overall', 'disability')
"""


def compared_copy(world: Path, folder: Path) -> Path:
    """A copy of a built world in which m-small's baseline arm has three runs: run_comparison
    compares each with the previous one, and the last with a pinned baseline."""
    return _copy_with(world, folder, RUN_ROWS)


def test_a_target_with_two_runs_gets_the_run_to_run_changes(report_world, rendered, tmp_path):
    """Without gates: the change of each measure from the previous run to the latest, read from
    run_comparison, with display names; absent when no target has two runs."""
    wh = Warehouse(report_world)
    try:
        assert wh.rows("run_comparison", {"compared_by": "run"}).empty
    finally:
        wh.con.close()
    assert 'id="runs"' not in rendered.index.read_text()
    copy = compared_copy(report_world, tmp_path / "world")
    out = render_report(copy, tmp_path / "compared")
    html = out.index.read_text()
    assert 'id="gates"' not in html
    runs = html[html.index('id="runs"') : html.index('id="headline"')]
    assert (
        "run-b to run-c" in runs and "run-a to run-b" not in runs and "run-a to run-c" not in runs
    )
    wh = Warehouse(copy)
    try:
        checked = check_figures([out.index], wh)
        expected = wh.con.execute(
            "select metric, display_name from run_comparison left join stg_seeds__metrics "
            "using (metric) where candidate_run_id = 'run-c' and comparison = 'previous' "
            "and slice = 'overall'"
        ).df()
    finally:
        wh.con.close()
    # previous, latest, change, its interval, p and pairs of each overall row
    assert checked["run_comparison"] == 6 * len(expected) > 0
    keys = parse(out.index).keys
    printed = [
        keys[int(k)]
        for k in re.findall(r'data-src="run_comparison" data-col="change" data-k="(\d+)"', runs)
    ]
    assert sorted(k["metric"] for k in printed) == sorted(expected.metric)
    assert {k["candidate_cohort"] for k in printed} == {"run-c"}
    headers = re.findall(r'<th scope="row"(?: title="([^"]*)")?>([^<]*)</th>', runs)
    assert set(expected.metric) <= {title or text for title, text in headers}
    for r in expected.itertuples():
        if isinstance(r.display_name, str) and r.display_name != r.metric:
            assert (r.metric, r.display_name) in headers, (r.metric, headers)


def test_gate_verdicts_open_the_report_only_when_gate_results_has_rows(
    report_world, rendered, tmp_path
):
    assert 'id="gates"' not in rendered.index.read_text()
    copy = gated_copy(report_world, tmp_path / "world")
    out = render_report(copy, tmp_path / "gated")
    html = out.index.read_text()
    assert 'id="gates"' in html and html.index('id="gates"') < html.index('id="headline"')
    assert "BLOCKS: fail" in html and "max-vader: vader overall=all" in html
    assert "an earlier run, not shown" not in html
    wh = Warehouse(copy)
    try:
        # observed, threshold and pairs of both rows, and the one interval
        assert check_figures([out.index], wh)["gate_results"] == 7
    finally:
        wh.con.close()
    # an empty gate_results (a build without gates) adds no section
    con = duckdb.connect(str(copy))
    try:
        con.execute("delete from gate_results")
    finally:
        con.close()
    assert 'id="gates"' not in render_report(copy, tmp_path / "empty").index.read_text()


def test_a_missing_or_unbuilt_warehouse_is_one_clear_error(tmp_path, capsys):
    with pytest.raises(ReportError, match="run `ableaudit build`"):
        render_report(tmp_path / "nothing.duckdb")
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    assert main(["report", "--warehouse", str(empty)]) == 2
    assert "has no mart `degradation`" in capsys.readouterr().err


def test_the_audit_flow_task_renders_the_report_and_puts_the_headline_on_the_run(
    report_world, tmp_path
):
    """The Prefect API holds, on the flow run, the headline as a table (the terminal's rows)
    and a page naming the commands that open the viewer and the report (no file:// link)."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    from ableaudit.audit import tasks
    from ableaudit.report.headline_table import COLUMNS, headline_rows

    copy = tmp_path / "published" / report_world.name
    copy.parent.mkdir()
    shutil.copy(report_world, copy)

    @flow(name="render-report-wiring")
    def wiring(published: str) -> tuple[str, str]:
        from prefect.runtime import flow_run

        return tasks.render_report(published), flow_run.id

    index, run_id = wiring(str(copy))
    index = Path(index)
    assert index == copy.parent / copy.stem / "report" / "index.html" and index.is_file()
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
        )
    by_key = {a.key: a for a in found}
    assert set(by_key) == {"audit-headline", "audit-report"}, [a.key for a in found]
    table = by_key["audit-headline"]
    assert table.type == "table"
    rows = headline_rows(copy)
    assert len(rows) > 1
    assert json.loads(table.data) == [dict(zip(COLUMNS, row)) for row in rows]
    page = by_key["audit-report"]
    assert page.type == "markdown" and "file://" not in page.data
    assert f"`ableaudit view --warehouse {copy}`" in page.data and f"`{index}`" in page.data
    for row in rows:  # the key figures: every headline row, as a row of the page's table
        assert "| " + " | ".join(row) + " |" in page.data


def test_build_renders_the_report_beside_the_published_copy(
    dbt_env, report_world, tmp_path, capsys
):
    live = tmp_path / "live" / report_world.name
    live.parent.mkdir()
    shutil.copy(report_world.parent.parent / report_world.name, live)
    assert main(["build", "--warehouse", str(live)]) == 0
    index = live.parent / "published" / live.stem / "report" / "index.html"
    assert f"Report {index}" in capsys.readouterr().out
    assert parse(index).sections == SECTIONS


@pytest.fixture
def made_pages(monkeypatch) -> list[tuple[str, str]]:
    """(task, model) of every evidence page whose main part a render makes anew."""
    from ableaudit.report import evidence

    made: list[tuple[str, str]] = []
    real = evidence._page

    def spy(marts, task, query_set, model_id, *rest):
        made.append((task, model_id))
        return real(marts, task, query_set, model_id, *rest)

    monkeypatch.setattr(evidence, "_page", spy)
    return made


def _pages_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*.html")}


def test_a_later_report_keeps_the_evidence_pages_whose_inputs_are_the_same(
    report_world, tmp_path, monkeypatch, made_pages
):
    """A text model's evidence page keeps its main part from the previous report when the
    model's rows the page reads have the fingerprints they had (the publish records them),
    under the same report code and max_pairs; the pages are the same bytes as a report made
    from scratch. A changed model's page, every picture set's page, and every page under
    other report code are made anew."""
    from ableaudit.report import render

    copy = tmp_path / "published" / report_world.name
    copy.parent.mkdir()
    shutil.copy(report_world, copy)
    out = tmp_path / "report"
    text = sorted(("text", m) for m in TEXT_MODELS)
    vision = sorted(("vision", m) for m in VISION_MODELS)

    render_report(copy, out)
    assert sorted(made_pages) == sorted(text + vision)
    first = _pages_of(out)
    made_pages.clear()
    render_report(copy, out)
    assert sorted(made_pages) == vision
    assert _pages_of(out) == first

    # one model's answer changes, as a publish writes it: the rows and their fingerprint
    changed = "m-mid"
    written = copy.stat()
    con = duckdb.connect(str(copy))
    (generation,) = con.execute(
        "select min(disability_generation_id) from int_pairs where model_id = ?", [changed]
    ).fetchone()
    con.execute(
        "update stg_raw__generations set response_text = 'A rewritten answer' where generation_id = ?",
        [generation],
    )
    con.execute(
        "update publish.relation_groups set hash_xor = xor(hash_xor, 1) "
        "where relation_name = 'stg_raw__generations' and group_value = ?",
        [changed],
    )
    con.close()
    # every page shows when the copy was written (to the minute): keep that time, so that the
    # pages compared differ by what the edit changed, whichever minute it ran in
    os.utime(copy, (written.st_atime, written.st_mtime))
    made_pages.clear()
    render_report(copy, out)
    assert sorted(made_pages) == sorted([("text", changed), *vision])
    again = _pages_of(out)
    assert again == _pages_of(render_report(copy, tmp_path / "fresh").index.parent)
    changed_pages = {p for p in again if again[p] != first.get(p)}
    assert len(changed_pages) == 1 and changed in next(iter(changed_pages))
    assert "A rewritten answer" in again[next(iter(changed_pages))].decode()

    # other report code, or another max_pairs: nothing kept
    monkeypatch.setattr(render, "code_digest", lambda: "other code")
    made_pages.clear()
    render_report(copy, out)
    assert sorted(made_pages) == sorted(text + vision)
    made_pages.clear()
    render_report(copy, out, max_pairs=1)
    assert sorted(made_pages) == sorted(text + vision)


def test_a_warehouse_without_publish_fingerprints_makes_every_page_anew(
    report_world, tmp_path, made_pages
):
    lone = tmp_path / "lone.duckdb"
    shutil.copy(report_world, lone)
    con = duckdb.connect(str(lone))
    con.execute("drop table publish.relation_groups")
    con.close()
    for _ in range(2):
        made_pages.clear()
        render_report(lone, tmp_path / "out")
        assert len(made_pages) == len(TEXT_MODELS) + len(VISION_MODELS)
