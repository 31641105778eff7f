"""The report's sections: each answers one question from the marts, and says what data it rests on.

Every figure printed is a value of a mart row (or, for the drill-down, of an
intermediate table), formatted by ``ableaudit.report.format`` and carried with
its ``Source``; nothing is recomputed here. A section whose marts are empty keeps
its heading and says in one sentence what would fill it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ableaudit.report import charts
from ableaudit.report import format as fmt
from ableaudit.report.marts import Marts
from ableaudit.report.records import (
    Cell,
    Chart,
    Heading,
    Paragraph,
    Section,
    Source,
    Table,
)

ALPHA = 0.05
DIMENSIONS = ("interpret", "stereotype", "framing", "abstain")
BASELINE = "baseline"
Links = Callable[..., "str | None"]


def _none(value: Any) -> Any:
    return None if fmt.missing(value) else value


def key_of(row: Any, columns: Iterable[str]) -> dict[str, Any]:
    """The key of a mart row, JSON-ready (NaN becomes null, numpy scalars plain Python)."""
    if hasattr(row, "_asdict"):
        row = row._asdict()
    out = {}
    for c in columns:
        v = _none(row[c])
        out[c] = v.item() if hasattr(v, "item") else v
    return out


def _groups(frame: pd.DataFrame, by: list[str]) -> list[tuple[tuple, pd.DataFrame]]:
    if frame.empty:
        return []
    return [
        ((k,) if not isinstance(k, tuple) else k, g)
        for k, g in frame.groupby(by, sort=True, dropna=False)
    ]


def _metric_label(metric: str) -> str:
    if metric.startswith("judge_score:"):
        return f"judge score ({metric.split(':', 1)[1]})"
    if ":" in metric:
        dim, judge = metric.split(":", 1)
        return f"{dim} ({judge})"
    return metric


def _arms(values: Iterable[str]) -> list[str]:
    """Arms with the baseline first."""
    vals = sorted(set(values))
    return ([BASELINE] if BASELINE in vals else []) + [v for v in vals if v != BASELINE]


@dataclass
class Context:
    """What every section builder needs: the marts and the evidence links."""

    marts: Marts
    """The warehouse, read-only."""
    link: Links
    """``link(task, query_set, model_id, **filters)``: the href of the pairs behind a cell, or None."""
    chart_ids: Iterator[str]
    """A supply of unique ids for charts."""

    def next_id(self) -> str:
        return next(self.chart_ids)


# --------------------------------------------------------------------------- data statements


def data_statement(
    marts: Marts,
    relation: str,
    key: dict[str, Any] | None = None,
    judges: bool = True,
    pairs_column: str = "n_pairs",
) -> list[tuple[str, list[tuple[str, Source | None]]]]:
    """Models, arms, runs, pairs per row, threshold and judges of the mart rows matching ``key``.

    The statement describes exactly the rows ``key`` selects (so each figure in it
    can be checked against the mart), even when a section shows fewer of them.
    """
    frame = marts.frame(relation)
    for col, value in (key or {}).items():
        frame = frame[frame[col] == value]
    runs = marts.frame("data_quality")
    key = key or {}
    out: list[tuple[str, list[tuple[str, Source | None]]]] = []
    if frame.empty:
        return out
    if "model_id" in frame:
        models = sorted(frame.model_id.dropna().unique())
        out.append(("Models", [(", ".join(models), None)]))
    if "task" in frame:
        out.append(("Tasks", [(", ".join(sorted(frame.task.dropna().unique())), None)]))
    if "arm" in frame:
        out.append(("Arms", [(", ".join(_arms(frame.arm.dropna())), None)]))
    if not runs.empty and "model_id" in frame:
        run_ids = sorted(runs[runs.model_id.isin(frame.model_id)].run_id.dropna().unique())
        if run_ids:
            out.append(("Runs", [(", ".join(run_ids), None)]))
    if pairs_column in frame and frame[pairs_column].notna().any():
        out.append(
            (
                "Pairs per row",
                [
                    (
                        fmt.count(frame[pairs_column].min()),
                        Source(relation, pairs_column, key, "min"),
                    ),
                    (" to ", None),
                    (
                        fmt.count(frame[pairs_column].max()),
                        Source(relation, pairs_column, key, "max"),
                    ),
                ],
            )
        )
    if "threshold" in frame and frame.threshold.notna().any():
        values = sorted(frame.threshold.dropna().unique())
        items: list[tuple[str, Source | None]] = []
        for i, v in enumerate(values):
            if i:
                items.append((", ", None))
            items.append((fmt.threshold(v), Source(relation, "threshold", key, "distinct")))
        items.append((" (share of |neutral score|)", None))
        out.append(("Threshold", items))
    if judges and "judge_name" in frame:
        names = sorted(frame.judge_name.dropna().unique())
        out.append(("Judges", [(", ".join(names) if names else "none", None)]))
    return out


# --------------------------------------------------------------------------- headline


def headline(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "headline",
        "Headline: how often is the disability-aware answer worse?",
        "Per model, arm and metric: the share of pairs whose disability-aware answer scores worse than "
        "the neutral one, with the shift in the metric's own units, its 95 % interval and whether it "
        "is significant after Holm's correction.",
    )
    deg = m.frame("degradation", "slice = 'overall'", "task, query_set, model_id, arm, metric")
    sig = m.frame("significance", "slice = 'overall'")
    if deg.empty:
        section.empty = (
            "The degradation mart is empty: land generations (an audit or `ableaudit import responses`) "
            "and run `ableaudit build` to fill it."
        )
        return section
    section.data_statement = data_statement(m, "degradation", {"slice": "overall"})
    section.blocks.append(
        Paragraph(
            "Each rate carries its 95 % Wilson interval (degradation mart, pairs taken as independent); the shift's "
            "interval is the bootstrap interval of the mean shift (significance mart), resampling whole queries. "
            "'Significant' means "
            f"Holm-adjusted p < {ALPHA} for the t-test of the per-query mean shifts (each query counts once, "
            "however many pairs share its neutral answer) AND a shift interval that excludes 0 "
            "(significance mart, column significant)."
        )
    )
    sig_key = ["task", "model_id", "arm", "query_set", "metric"]
    sig_rows = {tuple(r[c] for c in sig_key): r for _, r in sig.iterrows()} if not sig.empty else {}
    for (task, query_set), g in _groups(deg, ["task", "query_set"]):
        counted = g.groupby("metric").n_pairs.max()
        empty_metrics = sorted(counted[counted == 0].index)
        g = g[~g.metric.isin(empty_metrics)]
        rows = []
        for _, r in g.iterrows():
            k = key_of(
                r, ["task", "model_id", "arm", "query_set", "metric", "slice", "slice_value"]
            )
            src = lambda col, k=k: Source("degradation", col, k)
            s = sig_rows.get(tuple(r[c] for c in sig_key))
            sk = (
                key_of(
                    s, ["task", "model_id", "arm", "query_set", "metric", "slice", "slice_value"]
                )
                if s is not None
                else None
            )
            ssrc = lambda col, sk=sk: Source("significance", col, sk) if sk else None
            significant = s is not None and bool(s.significant)
            rows.append(
                [
                    fmt.row_header(r.model_id),
                    fmt.row_header(r.arm),
                    fmt.row_header(_metric_label(r.metric)),
                    fmt.shaded(
                        fmt.pct(r.degradation_pct),
                        r.degradation_pct,
                        src("degradation_pct"),
                        colour=fmt.rate_colour(r.degradation_pct),
                        href=ctx.link(task, query_set, r.model_id, arm=r.arm),
                        link_label=f"{r.model_id}, {r.arm}, {_metric_label(r.metric)}: {fmt.pct(r.degradation_pct)} % "
                        f"of {fmt.count(r.n_pairs)} pairs degraded; show the pairs",
                    ),
                    _ci_cell(
                        r,
                        "degradation_ci_low_pct",
                        "degradation_ci_high_pct",
                        "degradation",
                        k,
                        1,
                        sign=False,
                    ),
                    fmt.fig(fmt.count(r.n_pairs), src("n_pairs")),
                    fmt.fig(fmt.count(r.n_excluded), src("n_excluded")),
                    fmt.fig(fmt.signed(s.mean_diff), ssrc("mean_diff"))
                    if s is not None
                    else fmt.label(fmt.NA),
                    _ci_cell(s, "ci_low", "ci_high", "significance", sk)
                    if s is not None
                    else fmt.label(fmt.NA),
                    fmt.fig(fmt.pvalue(s.p_holm), ssrc("p_holm"))
                    if s is not None
                    else fmt.label(fmt.NA),
                    fmt.label(
                        "yes"
                        if significant
                        else "no"
                        if s is not None and fmt.is_finite(s.p_holm)
                        else fmt.NA
                    ),
                ]
            )
        note = None
        if empty_metrics:
            note = (
                f"No pair was counted for {', '.join(map(_metric_label, empty_metrics))}: every pair was excluded "
                "(see Trust: data quality for why)."
            )
        section.blocks.append(
            Table(
                caption=f"Degradation per model, arm and metric ({task}, query set {query_set}); rates in %, "
                "shift = disability-aware minus neutral score",
                columns=[
                    "Model",
                    "Arm",
                    "Metric",
                    "Degradation rate (%)",
                    "95 % CI of the rate",
                    "Pairs counted",
                    "Pairs excluded",
                    "Mean shift",
                    "95 % CI of the shift",
                    "Holm p",
                    "Significant",
                ],
                rows=rows,
                row_headers=3,
                shaded=True,
                legend=fmt.RATE_LEGEND,
                note=note,
            )
        )
    return section


def _ci_cell(
    row: Any,
    low: str,
    high: str,
    relation: str,
    key: dict | None,
    digits: int = 2,
    sign: bool = True,
) -> Cell:
    """An interval cell; its two ends each carry their provenance (low in source, high in ``note`` source)."""
    if key is None or fmt.missing(row[low]) or fmt.missing(row[high]):
        return fmt.label(fmt.NA)
    return Cell(
        text=fmt.interval(row[low], row[high], digits, sign),
        numeric=True,
        source=Source(relation, f"{low}|{high}", key),
    )


GATE_KEY = ["rule_id", "task", "model_id", "arm", "query_set", "run_id", "scope"]
_GATE_ORDER = {"fail": 0, "inconclusive": 1, "pass": 2}


def release_gates(ctx: Context) -> Section | None:
    """The release gates' verdicts on the latest run of each target, blocking ones first; the
    report opens with them when gate_results has rows (docs/gates.md)."""
    m = ctx.marts
    if not m.has("gate_results"):
        return None
    gates = m.frame("gate_results", "is_latest_run")
    if gates.empty:
        return None
    section = Section(
        "gates",
        "Release gates: may this release go?",
        "The verdict of every rule of the gates file on the latest run of each model and arm: "
        "pass, fail, or inconclusive when the evidence is too thin to decide.",
    )
    gates = gates.assign(
        _blocks=~gates.passed_for_gate.astype(bool),
        _order=gates.verdict.map(_GATE_ORDER).fillna(3),
    ).sort_values(
        ["_blocks", "_order", "severity", "rule_id", "scope"],
        ascending=[False, True, True, True, True],
    )
    n_block = int(gates._blocks.sum())
    section.blocks.append(
        Paragraph(
            (
                f"The release is blocked: {n_block} verdict{'s' if n_block != 1 else ''} of error rules "
                "fail or are inconclusive."
                if n_block
                else "No error rule blocks the release."
            )
            + " A gate never passes for lack of evidence: an inconclusive verdict blocks an error rule "
            "unless the rule allows it; a warn rule only reports. Observed and threshold are rates in %, "
            "a judge-score drop in points, or a change in points (no_regression)."
        )
    )
    rows = []
    for _, r in gates.iterrows():
        k = key_of(r, [c for c in GATE_KEY if c in gates.columns])
        src = lambda col, k=k: Source("gate_results", col, k)
        rows.append(
            [
                fmt.row_header(r.rule_id),
                fmt.label(f"{r.model_id}, {r.arm}"),
                fmt.label(r.scope),
                fmt.label(("BLOCKS: " if r._blocks else "") + str(r.verdict)),
                fmt.label(r.severity),
                fmt.fig(fmt.number(r.observed, 1), src("observed")),
                fmt.fig(fmt.number(r.threshold, 1), src("threshold")),
                _ci_cell(r, "ci_low", "ci_high", "gate_results", k, 1),
                fmt.fig(fmt.count(r.n_pairs), src("n_pairs")),
                fmt.label(r.message),
            ]
        )
    section.blocks.append(
        Table(
            "Gate verdicts on the latest run of each target (gate_results), blocking ones first",
            [
                "Rule",
                "Model, arm",
                "Scope",
                "Verdict",
                "Severity",
                "Observed",
                "Threshold",
                "95 % interval",
                "Pairs",
                "Why",
            ],
            rows,
            row_headers=1,
        )
    )
    return section


# --------------------------------------------------------------------------- the papers' shaded tables


def _measures(deg: pd.DataFrame, shift: pd.DataFrame) -> list[str]:
    """Degradation metrics with at least one counted pair, then judge dimensions ('dim:judge')."""
    counted = deg.groupby("metric").n_pairs.max() if not deg.empty else pd.Series(dtype=float)
    metrics = sorted(counted[counted > 0].index)
    dims = []
    if not shift.empty:
        for judge in sorted(shift.judge_name.dropna().unique()):
            dims += [
                f"{d}:{judge}"
                for d in DIMENSIONS
                if ((shift.judge_name == judge) & (shift.dimension == d)).any()
            ]
    return metrics + dims


def _rate_cell(
    ctx: Context,
    deg_idx: dict,
    shift_idx: dict,
    task: str,
    query_set: str,
    model: str,
    arm: str,
    measure: str,
    slice_: str,
    value: str,
    what: str,
    **filters: str,
) -> Cell:
    """The shaded cell of one measure: a degradation rate, or a judge dimension's 'Yes' rate."""
    if ":" in measure and not measure.startswith("judge_score:"):
        dim, judge = measure.split(":", 1)
        r = shift_idx.get((task, query_set, model, arm, judge, dim, slice_, value))
        if r is None:
            return fmt.label(fmt.NA)
        k = key_of(
            r,
            [
                "task",
                "model_id",
                "arm",
                "query_set",
                "judge_name",
                "slice",
                "slice_value",
                "dimension",
            ],
        )
        rate, n, relation, column = r.yes_pct, r.n_pairs_judged, "interpretive_shift", "yes_pct"
        desc = f"labelled Yes for {dim} by {judge}"
    else:
        r = deg_idx.get((task, query_set, model, arm, measure, slice_, value))
        if r is None:
            return fmt.label(fmt.NA)
        k = key_of(r, ["task", "model_id", "arm", "query_set", "metric", "slice", "slice_value"])
        rate, n, relation, column = r.degradation_pct, r.n_pairs, "degradation", "degradation_pct"
        desc = f"degraded on {_metric_label(measure)}"
    low, high = _RATE_CI[relation]
    interval = fmt.interval(getattr(r, low), getattr(r, high), 1, sign=False)
    more = (
        (" n ", fmt.count(n), Source(relation, _RATE_N[relation], k)),
        (" ", interval, Source(relation, f"{low}|{high}", k)),
    )
    return fmt.shaded(
        fmt.pct(rate),
        rate,
        Source(relation, column, k),
        # shaded by the interval's lower end: a darker cell is one whose rate is surely larger
        colour=fmt.rate_colour(getattr(r, low)),
        href=ctx.link(task, query_set, model, arm=arm, **filters),
        link_label=f"{what}: {fmt.pct(rate)} % of {fmt.count(n)} pairs {desc}, 95 % interval "
        f"{interval}; show the pairs",
        more=more,
    )


_RATE_CI = {
    "degradation": ("degradation_ci_low_pct", "degradation_ci_high_pct"),
    "interpretive_shift": ("yes_ci_low_pct", "yes_ci_high_pct"),
}
_RATE_N = {"degradation": "n_pairs", "interpretive_shift": "n_pairs_judged"}


HETEROGENEITY_KEY = ["task", "model_id", "arm", "query_set", "metric", "factor"]


def _heterogeneity_table(
    het: pd.DataFrame, task: str, query_set: str, factor: str, label: str
) -> Table | None:
    """Do the rates of one factor's levels differ at all? The heterogeneity mart's test, the worst
    and best level and the gap's interval, per model, arm and metric."""
    if het.empty:
        return None
    h = het[(het.task == task) & (het.query_set == query_set) & (het.factor == factor)]
    if h.empty:
        return None
    rows = []
    for r in h.sort_values(["model_id", "arm", "metric"]).itertuples():
        k = key_of(r._asdict(), HETEROGENEITY_KEY)
        src = lambda col, k=k: Source("heterogeneity", col, k)
        rows.append(
            [
                fmt.row_header(r.model_id),
                fmt.row_header(r.arm),
                fmt.row_header(_metric_label(r.metric)),
                fmt.fig(fmt.pvalue(r.p_value), src("p_value")),
                fmt.label(r.worst_level),
                fmt.fig(fmt.pct(r.worst_pct), src("worst_pct")),
                fmt.label(r.best_level),
                fmt.fig(fmt.pct(r.best_pct), src("best_pct")),
                fmt.fig(fmt.pct(r.gap_pct), src("gap_pct")),
                _ci_cell(r._asdict(), "gap_ci_low", "gap_ci_high", "heterogeneity", k, 1, False),
            ]
        )
    test = (
        "Cochran's Q on the pairs of each neutral answer"
        if factor == "disability"
        else ("one-way ANOVA of the per-query rates")
    )
    return Table(
        caption=f"Do the {label} rates differ? ({task}, {query_set}; {test})",
        columns=[
            "Model",
            "Arm",
            "Metric",
            "p (rates equal)",
            f"Worst {label}",
            "Its rate (%)",
            f"Best {label}",
            "Its rate (%)",
            "Gap (points)",
            "95 % CI of the gap (whole queries resampled)",
        ],
        rows=rows,
        row_headers=3,
    )


def shaded_tables(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "shaded",
        "The papers' shaded tables",
        "Where is the disability-aware answer worse: per model and metric, per domain, per disability, "
        "and for vision models per disability and metric?",
    )
    deg = m.frame("degradation")
    shift = m.frame("interpretive_shift")
    het = m.frame("heterogeneity")
    if deg.empty and shift.empty:
        section.empty = (
            "The degradation and interpretive_shift marts are empty: audit a model and run "
            "`ableaudit build` to fill them."
        )
        return section
    section.data_statement = data_statement(m, "degradation", {"slice": "overall"})
    section.blocks.append(
        Paragraph(
            "Cells print the rate in %: for a metric, the share of counted pairs whose disability-aware answer is "
            "degraded (Eq. 1); for a judge dimension (interpret, stereotype, framing, abstain), the share of judged pairs "
            "the contrastive judge labels Yes; then n, the pairs counted, and the rate's 95 % Wilson interval. A cell is "
            "shaded by the lower end of its interval, not by the rate: a cell is darker than another only where its rate "
            "is surely at least that large, so 2 of 12 pairs (16.7 %, [4.7, 44.8]) is barely darker than 0 of 12. "
            "Whether the categories or domains differ at all is tested in the heterogeneity mart. "
            "Each cell links to the pairs behind it."
        )
    )
    deg_idx = {
        (r.task, r.query_set, r.model_id, r.arm, r.metric, r.slice, r.slice_value): r
        for r in deg.itertuples()
    }
    shift_idx = {
        (
            r.task,
            r.query_set,
            r.model_id,
            r.arm,
            r.judge_name,
            r.dimension,
            r.slice,
            r.slice_value,
        ): r
        for r in shift.itertuples()
    }
    tasks = sorted(
        set(
            map(
                tuple,
                pd.concat([deg[["task", "query_set"]], shift[["task", "query_set"]]])
                .drop_duplicates()
                .values.tolist(),
            )
        )
    )
    for task, query_set in tasks:
        d = deg[(deg.task == task) & (deg.query_set == query_set)]
        s = (
            shift[(shift.task == task) & (shift.query_set == query_set)]
            if not shift.empty
            else shift
        )
        measures = _measures(d, s)
        if not measures:
            continue
        units = sorted(
            set(
                map(
                    tuple,
                    pd.concat([d[["model_id", "arm"]], s[["model_id", "arm"]]])
                    .drop_duplicates()
                    .values.tolist(),
                )
            ),
            key=lambda u: (u[0], u[1] != BASELINE, u[1]),
        )
        section.blocks.append(Heading(f"{task.capitalize()} models, query set {query_set}"))
        rows = [
            [fmt.row_header(model), fmt.row_header(arm)]
            + [
                _rate_cell(
                    ctx,
                    deg_idx,
                    shift_idx,
                    task,
                    query_set,
                    model,
                    arm,
                    ms,
                    "overall",
                    "all",
                    f"{model}, {arm}, {_metric_label(ms)}",
                )
                for ms in measures
            ]
            for model, arm in units
        ]
        section.blocks.append(
            Table(
                caption=f"Model x metric: rate in % ({task}, {query_set}; all pairs of each model and arm)",
                columns=["Model", "Arm", *map(_metric_label, measures)],
                rows=rows,
                row_headers=2,
                shaded=True,
                legend=fmt.RATE_LEGEND,
            )
        )
        for slice_, label, filter_name in (
            ("domain", "domain", "domain"),
            ("disability", "disability", "disability"),
        ):
            values = sorted(
                set(d[d.slice == slice_].slice_value)
                | set(s[s.slice == slice_].slice_value if not s.empty else [])
            )
            if not values:
                continue
            for ms in measures:
                rows = [
                    [fmt.row_header(model), fmt.row_header(arm)]
                    + [
                        _rate_cell(
                            ctx,
                            deg_idx,
                            shift_idx,
                            task,
                            query_set,
                            model,
                            arm,
                            ms,
                            slice_,
                            v,
                            f"{model}, {arm}, {_metric_label(ms)}, {label} {v}",
                            **{filter_name: v},
                        )
                        for v in values
                    ]
                    for model, arm in units
                ]
                section.blocks.append(
                    Table(
                        caption=f"Model x {label}, {_metric_label(ms)}: rate in % ({task}, {query_set})",
                        columns=["Model", "Arm", *values],
                        rows=rows,
                        row_headers=2,
                        shaded=True,
                        legend=fmt.RATE_LEGEND,
                    )
                )
            differ = _heterogeneity_table(het, task, query_set, slice_, label)
            if differ is not None:
                section.blocks.append(differ)
        if task == "vision":
            values = sorted(
                set(d[d.slice == "disability"].slice_value)
                | set(s[s.slice == "disability"].slice_value if not s.empty else [])
            )
            for model, arm in units:
                rows = [
                    [fmt.row_header(v)]
                    + [
                        _rate_cell(
                            ctx,
                            deg_idx,
                            shift_idx,
                            task,
                            query_set,
                            model,
                            arm,
                            ms,
                            "disability",
                            v,
                            f"{model}, {arm}, disability {v}, {_metric_label(ms)}",
                            disability=v,
                        )
                        for ms in measures
                    ]
                    for v in values
                ]
                section.blocks.append(
                    Table(
                        caption=f"Disability x metric for {model}, arm {arm}: rate in % (vision, {query_set})",
                        columns=["Disability", *map(_metric_label, measures)],
                        rows=rows,
                        row_headers=1,
                        shaded=True,
                        legend=fmt.RATE_LEGEND,
                    )
                )
    return section


# --------------------------------------------------------------------------- threshold sensitivity and scaling


def _reference_arm(arms: Iterable[str]) -> str:
    arms = _arms(arms)
    return arms[0]


def sensitivity(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "sensitivity",
        "Threshold sensitivity",
        "Does the degradation rate hold at other thresholds, and do degraded pairs outnumber improved "
        "ones (one-sided sign test)?",
    )
    ts = m.frame(
        "threshold_sensitivity", "n_pairs > 0", "task, query_set, model_id, arm, metric, threshold"
    )
    if ts.empty:
        section.empty = (
            "The threshold_sensitivity mart has no counted pairs: it fills once pairs have scores "
            "(audit, then `ableaudit build`)."
        )
        return section
    section.data_statement = data_statement(m, "threshold_sensitivity")
    for (task, query_set), g in _groups(ts, ["task", "query_set"]):
        thresholds = sorted(g.threshold.unique())
        idx = {(r.model_id, r.arm, r.metric, r.threshold): r for r in g.itertuples()}
        rows = []
        for (model, arm, metric), _ in _groups(g, ["model_id", "arm", "metric"]):
            cells = [
                fmt.row_header(model),
                fmt.row_header(arm),
                fmt.row_header(_metric_label(metric)),
            ]
            for t in thresholds:
                r = idx.get((model, arm, metric, t))
                if r is None:
                    cells += [fmt.label(fmt.NA), fmt.label(fmt.NA)]
                    continue
                k = key_of(
                    r._asdict(), ["task", "model_id", "arm", "query_set", "metric", "threshold"]
                )
                cells += [
                    fmt.fig(
                        fmt.pct(r.degradation_pct),
                        Source("threshold_sensitivity", "degradation_pct", k),
                    ),
                    fmt.fig(
                        fmt.pvalue(r.sign_test_p), Source("threshold_sensitivity", "sign_test_p", k)
                    ),
                ]
            rows.append(cells)
        table = Table(
            caption=f"Degradation rate (%) and sign-test p at each threshold ({task}, {query_set})",
            columns=["Model", "Arm", "Metric"]
            + [c for _ in thresholds for c in ("rate %", "sign p")],
            column_groups=[("", 3)] + [(f"threshold {fmt.threshold(t)}", 2) for t in thresholds],
            rows=rows,
            row_headers=3,
        )
        section.blocks.append(Heading(f"{task.capitalize()}, query set {query_set}"))
        arm = _reference_arm(g.arm)
        for metric, mg in _groups(g[g.arm == arm], ["metric"]):
            series = {
                model: [(float(r.threshold), float(r.degradation_pct)) for r in x.itertuples()]
                for (model,), x in _groups(mg, ["model_id"])
            }
            chart_table = Table(
                caption=f"Data of the chart: degradation rate (%) by threshold, {_metric_label(metric[0])}, arm {arm}",
                columns=["Model", *[fmt.threshold(t) for t in thresholds]],
                rows=[
                    [fmt.row_header(model)]
                    + [
                        fmt.fig(
                            fmt.pct(idx[(model, arm, metric[0], t)].degradation_pct),
                            Source(
                                "threshold_sensitivity",
                                "degradation_pct",
                                key_of(
                                    idx[(model, arm, metric[0], t)]._asdict(),
                                    ["task", "model_id", "arm", "query_set", "metric", "threshold"],
                                ),
                            ),
                        )
                        if (model, arm, metric[0], t) in idx
                        else fmt.label(fmt.NA)
                        for t in thresholds
                    ]
                    for model in series
                ],
            )
            cid = ctx.next_id()
            title = f"Degradation rate against threshold: {_metric_label(metric[0])} ({task}, arm {arm})"
            summary = (
                f"Lines of the degradation rate in % (vertical axis, 0 to 100) against the threshold "
                f"(horizontal axis) for {len(series)} models"
                + ("" if len(series) <= charts.MAX_LEGEND else ", too many to label in the chart")
                + "; the table after the chart lists every point."
            )
            section.blocks.append(
                Chart(
                    charts.line_chart(
                        cid,
                        title,
                        summary,
                        series,
                        "threshold (share of |neutral score|)",
                        "degradation rate (%)",
                    ),
                    title,
                    summary,
                    chart_table,
                )
            )
        section.blocks.append(table)
    return section


def scaling(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "scaling",
        "Scaling",
        "Does degradation grow or shrink with model size (Spearman's rho of "
        "the overall rate against the parameter count)?",
    )
    sc = m.frame("scaling", "", "task, query_set, arm, metric")
    if sc.empty or not (sc.n_models > 0).any():
        section.empty = (
            "No model has both a size and a rate: give each target `params_b` in the audit config "
            "(or add it to seeds/model_sizes.csv) and rebuild."
        )
        return section
    section.data_statement = data_statement(m, "scaling", pairs_column="n_models")
    section.data_statement = [(k, v) for k, v in section.data_statement if k != "Pairs per row"]
    rows = []
    for r in sc.itertuples():
        k = key_of(r._asdict(), ["task", "arm", "query_set", "metric"])
        rows.append(
            [
                fmt.row_header(r.task),
                fmt.row_header(r.arm),
                fmt.row_header(_metric_label(r.metric)),
                fmt.fig(fmt.count(r.n_models), Source("scaling", "n_models", k)),
                fmt.fig(
                    fmt.count(r.n_models_without_size),
                    Source("scaling", "n_models_without_size", k),
                ),
                fmt.fig(fmt.number(r.spearman_rho), Source("scaling", "spearman_rho", k)),
                fmt.fig(fmt.pvalue(r.spearman_p), Source("scaling", "spearman_p", k)),
                fmt.label(r.reason if not fmt.missing(r.reason) else ""),
            ]
        )
    sizes = m.frame("int_model_sizes")
    deg = m.frame("degradation", "slice = 'overall' and n_pairs > 0")
    if not sizes.empty and not deg.empty:
        for (task, query_set), g in _groups(sc[sc.n_models > 0], ["task", "query_set"]):
            arm = _reference_arm(g.arm)
            pts = deg[(deg.task == task) & (deg.query_set == query_set) & (deg.arm == arm)].merge(
                sizes, on="model_id"
            )
            if pts.empty:
                continue
            series = {
                _metric_label(metric): [
                    (r.model_id, float(r.params_b), float(r.degradation_pct))
                    for r in x.itertuples()
                ]
                for (metric,), x in _groups(pts, ["metric"])
            }
            chart_rows = [
                [
                    fmt.row_header(_metric_label(r.metric)),
                    fmt.row_header(r.model_id),
                    fmt.fig(
                        fmt.number(r.params_b, 1),
                        Source("int_model_sizes", "params_b", {"model_id": r.model_id}),
                    ),
                    fmt.fig(
                        fmt.pct(r.degradation_pct),
                        Source(
                            "degradation",
                            "degradation_pct",
                            key_of(
                                r._asdict(),
                                [
                                    "task",
                                    "model_id",
                                    "arm",
                                    "query_set",
                                    "metric",
                                    "slice",
                                    "slice_value",
                                ],
                            ),
                        ),
                    ),
                ]
                for r in pts.sort_values(["metric", "params_b"]).itertuples()
            ]
            cid = ctx.next_id()
            title = f"Degradation rate against model size ({task}, {query_set}, arm {arm})"
            summary = (
                "Points of each model's overall degradation rate in % (vertical axis) against its size in "
                "billions of parameters (horizontal axis, logarithmic), one marker per metric; "
                "the table after the chart lists every point."
            )
            section.blocks.append(
                Chart(
                    charts.scatter_chart(
                        cid,
                        title,
                        summary,
                        series,
                        "parameters (billions, log scale)",
                        "degradation rate (%)",
                    ),
                    title,
                    summary,
                    Table(
                        f"Data of the chart: size and overall degradation rate per model ({task}, arm {arm})",
                        ["Metric", "Model", "Parameters (billions)", "Degradation rate (%)"],
                        chart_rows,
                        row_headers=2,
                    ),
                )
            )
    section.blocks.append(
        Table(
            "Spearman correlation of degradation rate with model size (scaling)",
            [
                "Task",
                "Arm",
                "Metric",
                "Models with a size",
                "Models without",
                "Spearman rho",
                "p",
                "Why no rho",
            ],
            rows,
            row_headers=3,
        )
    )
    return section


# --------------------------------------------------------------------------- significance


def significance_rows(sig: pd.DataFrame) -> list[list[Cell]]:
    rows = []
    for r in sig.itertuples():
        k = key_of(
            r._asdict(), ["task", "model_id", "arm", "query_set", "metric", "slice", "slice_value"]
        )
        src = lambda c, k=k: Source("significance", c, k)
        rows.append(
            [
                fmt.row_header(r.model_id),
                fmt.row_header(r.arm),
                fmt.row_header(_metric_label(r.metric)),
                fmt.row_header(r.slice if r.slice == "overall" else f"{r.slice} {r.slice_value}"),
                fmt.fig(fmt.count(r.n_pairs), src("n_pairs")),
                fmt.fig(fmt.number(r.mean_neutral, 3), src("mean_neutral")),
                fmt.fig(fmt.number(r.mean_disability, 3), src("mean_disability")),
                fmt.fig(fmt.signed(r.mean_diff, 3), src("mean_diff")),
                _ci_cell(r._asdict(), "ci_low", "ci_high", "significance", k, 3),
                fmt.fig(fmt.pvalue(r.query_t_p), src("query_t_p")),
                fmt.fig(fmt.pvalue(r.p_holm), src("p_holm")),
                fmt.fig(fmt.pvalue(r.p_bh), src("p_bh")),
                fmt.label("yes" if r.significant else "no"),
                fmt.fig(fmt.number(r.min_detectable_diff, 3), src("min_detectable_diff")),
                fmt.fig(fmt.pvalue(r.paper_t_p), src("paper_t_p")),
                fmt.fig(fmt.number(r.cohen_dz), src("cohen_dz")),
                fmt.label(r.reason if not fmt.missing(r.reason) else ""),
            ]
        )
    return rows


SIG_COLUMNS = [
    "Model",
    "Arm",
    "Metric",
    "Slice",
    "Pairs",
    "Mean neutral",
    "Mean disability",
    "Shift",
    "95 % CI of the shift",
    "Query-level t-test p",
    "Holm p",
    "BH p",
    "Significant",
    "Smallest shift detectable (80 % power)",
    "Paper's t-test p (pairs as independent)",
    "Cohen's dz",
    "Why a value is missing",
]


def significance(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "significance",
        "Significance",
        "Is the shift between neutral and disability-aware scores "
        "real? Per slice: the t-test of the per-query mean shifts with Holm and Benjamini-Hochberg adjusted p, "
        "the bootstrap interval of the mean shift (whole queries resampled), the smallest shift the test "
        "would detect, and the papers' pair-level t-test for comparison with their tables.",
    )
    sig = m.frame("significance", "", "task, query_set, model_id, arm, metric, slice, slice_value")
    if sig.empty:
        section.empty = "The significance mart is empty: it fills once pairs have scores (audit, then `ableaudit build`)."
        return section
    section.data_statement = data_statement(m, "significance")
    section.blocks.append(
        Paragraph(
            "Shift = mean of disability-aware minus neutral score, in the metric's own units: for sentiment, regard and "
            "judge scores a negative shift is worse; for verbosity a positive one. The overall rows are below; "
            "every domain and disability slice is on the page 'Significance: every slice'."
        )
    )
    overall = sig[sig.slice == "overall"]
    for (task, query_set), g in _groups(overall, ["task", "query_set"]):
        arm = _reference_arm(g.arm)
        for (metric,), mg in _groups(g[(g.arm == arm) & g.ci_low.notna()], ["metric"]):
            rows = [
                (f"{r.model_id}", float(r.mean_diff), float(r.ci_low), float(r.ci_high))
                for r in mg.itertuples()
            ]
            cid = ctx.next_id()
            title = f"Mean shift with 95 % interval: {_metric_label(metric)} ({task}, arm {arm})"
            summary = (
                f"For each of {len(rows)} models a dot at the mean shift (disability-aware minus neutral) and a "
                "line for its 95 % bootstrap interval, with a vertical line at zero; the table after the chart "
                "lists the values."
            )
            section.blocks.append(
                Chart(
                    charts.interval_chart(
                        cid, title, summary, rows, f"shift in {_metric_label(metric)} units"
                    ),
                    title,
                    summary,
                    Table(
                        f"Data of the chart: {title}",
                        SIG_COLUMNS,
                        significance_rows(mg),
                        row_headers=4,
                    ),
                )
            )
        section.blocks.append(
            Table(
                f"Paired tests, overall ({task}, {query_set})",
                SIG_COLUMNS,
                significance_rows(g),
                row_headers=4,
            )
        )
    section.blocks.append(
        Paragraph("Significance: every slice (domains and disabilities)", "significance.html")
    )
    mc = m.frame("model_comparison", "", "task, query_set, arm, metric")
    if not mc.empty:
        rows = []
        for r in mc.itertuples():
            k = key_of(r._asdict(), ["task", "arm", "query_set", "metric"])
            rows.append(
                [
                    fmt.row_header(r.task),
                    fmt.row_header(r.arm),
                    fmt.row_header(_metric_label(r.metric)),
                    fmt.fig(fmt.count(r.k_models), Source("model_comparison", "k_models", k)),
                    fmt.fig(fmt.count(r.n_pairs), Source("model_comparison", "n_pairs", k)),
                    fmt.fig(fmt.number(r.anova_f), Source("model_comparison", "anova_f", k)),
                    fmt.fig(fmt.pvalue(r.anova_p), Source("model_comparison", "anova_p", k)),
                    fmt.label(r.reason if not fmt.missing(r.reason) else ""),
                ]
            )
        section.blocks.append(
            Table(
                "Do the models differ? One-way ANOVA of the per-pair shifts across models "
                "(model_comparison)",
                ["Task", "Arm", "Metric", "Models", "Pairs", "F", "p", "Why no F"],
                rows,
                row_headers=3,
            )
        )
    return section


# --------------------------------------------------------------------------- robustness


def robustness(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "robustness",
        "Robustness across temperatures and runs",
        "How much do the rates move across repeated samples and sampling temperatures?",
    )
    rb = m.frame(
        "robustness",
        "n_pairs > 0",
        "task, query_set, model_id, arm, measure_id, temperature, sample_index",
    )
    if rb.empty:
        section.empty = (
            "The robustness mart has no counted pairs: it fills once pairs have scores; set "
            "`samples` and `temperatures` in the audit config to compare runs."
        )
        return section
    section.data_statement = data_statement(m, "robustness")
    for (task, query_set), g in _groups(rb, ["task", "query_set"]):
        runs = sorted(set(zip(g.temperature, g.sample_index)))
        idx = {
            (r.model_id, r.arm, r.measure_id, r.temperature, r.sample_index): r
            for r in g.itertuples()
        }
        rows = []
        for (model, arm, measure), mg in _groups(g, ["model_id", "arm", "measure_id"]):
            cells = [
                fmt.row_header(model),
                fmt.row_header(arm),
                fmt.row_header(_metric_label(measure)),
            ]
            for t, s in runs:
                r = idx.get((model, arm, measure, t, s))
                cells.append(
                    fmt.label("not run")
                    if r is None
                    else fmt.fig(
                        fmt.pct(r.rate_pct),
                        Source(
                            "robustness",
                            "rate_pct",
                            key_of(
                                r._asdict(),
                                [
                                    "task",
                                    "model_id",
                                    "arm",
                                    "query_set",
                                    "measure_id",
                                    "temperature",
                                    "sample_index",
                                ],
                            ),
                        ),
                    )
                )
            gk = {
                "task": task,
                "model_id": model,
                "arm": arm,
                "query_set": query_set,
                "measure_id": measure,
            }
            first = mg.iloc[0]
            for col, f in (
                ("n_runs", fmt.count),
                ("mean_pct", fmt.pct),
                ("sd_pct", fmt.pct),
                ("range_pct", fmt.pct),
            ):
                cells.append(fmt.fig(f(first[col]), Source("robustness", col, gk, "distinct")))
            rows.append(cells)
        section.blocks.append(
            Table(
                f"Rate (%) in each run, by temperature and sample, and its spread ({task}, {query_set})",
                [
                    "Model",
                    "Arm",
                    "Measure",
                    *[f"T {fmt.threshold(t)}, sample {int(s)}" for t, s in runs],
                    "Runs",
                    "Mean %",
                    "SD (points)",
                    "Range (points)",
                ],
                rows,
                row_headers=3,
            )
        )
    return section


# --------------------------------------------------------------------------- vision


def vision(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "vision",
        "Vision: interpretive shift and group bias",
        "Do vision-language models read more into a picture when a disability is mentioned, and is "
        "that larger for some genders or races of the people pictured?",
    )
    shift = m.frame(
        "interpretive_shift",
        "task = 'vision' and slice in ('overall', 'disability')",
        "query_set, model_id, arm, judge_name, slice, slice_value, dimension",
    )
    gb = m.frame("group_bias", "", "query_set, model_id, arm, measure_id, grouping, group_value")
    if shift.empty and gb.empty:
        section.empty = (
            "No vision pairs were judged: audit a `task: vision` target over an image set with a "
            "contrastive judge, then `ableaudit build`."
        )
        return section
    section.data_statement = data_statement(
        m, "interpretive_shift", {"task": "vision"}, pairs_column="n_pairs_judged"
    )
    if not shift.empty:
        for (query_set, judge), g in _groups(shift, ["query_set", "judge_name"]):
            idx = {(r.model_id, r.arm, r.slice_value, r.dimension): r for r in g.itertuples()}
            rows = []
            for (model, arm, value), _ in _groups(g, ["model_id", "arm", "slice_value"]):
                cells = [
                    fmt.row_header(model),
                    fmt.row_header(arm),
                    fmt.row_header("all" if value == "all" else value),
                ]
                for dim in DIMENSIONS:
                    r = idx.get((model, arm, value, dim))
                    if r is None:
                        cells += [fmt.label(fmt.NA), fmt.label(fmt.NA)]
                        continue
                    k = key_of(
                        r._asdict(),
                        [
                            "task",
                            "model_id",
                            "arm",
                            "query_set",
                            "judge_name",
                            "slice",
                            "slice_value",
                            "dimension",
                        ],
                    )
                    filters = {} if value == "all" else {"disability": value}
                    cells += [
                        fmt.shaded(
                            fmt.pct(r.yes_pct),
                            r.yes_pct,
                            Source("interpretive_shift", "yes_pct", k),
                            colour=fmt.rate_colour(r.yes_pct),
                            href=ctx.link("vision", query_set, model, arm=arm, **filters),
                            link_label=f"{model}, {arm}, {value}, {dim}: {fmt.pct(r.yes_pct)} % Yes; show the pairs",
                        ),
                        fmt.fig(
                            fmt.count(r.n_pairs_judged),
                            Source("interpretive_shift", "n_pairs_judged", k),
                        ),
                    ]
                rows.append(cells)
            section.blocks.append(
                Table(
                    f"Interpretive shift, stereotype, framing and abstention per model and disability: % of judged pairs "
                    f"labelled Yes by {judge}, and pairs judged (vision, {query_set})",
                    ["Model", "Arm", "Disability"]
                    + [c for _ in DIMENSIONS for c in ("Yes %", "pairs")],
                    rows,
                    row_headers=3,
                    column_groups=[("", 3)] + [(d, 2) for d in DIMENSIONS],
                    shaded=True,
                    legend=fmt.RATE_LEGEND,
                )
            )
    if gb.empty:
        section.blocks.append(
            Paragraph(
                "The group_bias mart is empty: land the image set's identities "
                "(`ableaudit import images`) so each pair knows the gender and race pictured."
            )
        )
        return section
    section.blocks.append(
        Heading("Group bias: Δ(Group − All) by gender, race and their intersection")
    )
    key_cols = [
        "task",
        "model_id",
        "arm",
        "query_set",
        "temperature",
        "measure_id",
        "grouping",
        "group_value",
    ]
    for (query_set, model, arm), g in _groups(gb, ["query_set", "model_id", "arm"]):
        judge_measures = g[g.measure_kind == "judge"]
        for (measure,), mg in _groups(
            judge_measures[judge_measures.measure.isin(["interpret"])], ["measure_id"]
        ):
            pts = [
                (
                    f"{r.grouping}: {r.group_value}",
                    float(r.delta_pct),
                    _none(r.ci_low_pct),
                    _none(r.ci_high_pct),
                )
                for r in mg.itertuples()
                if fmt.is_finite(r.delta_pct)
            ]
            if not pts:
                continue
            cid = ctx.next_id()
            title = (
                f"Δ(Group − All) of {_metric_label(measure)} with 95 % interval: {model}, arm {arm}"
            )
            summary = (
                f"For each of {len(pts)} groups of people pictured, a dot at the group's rate minus the rate over "
                "all pictures, in percentage points, and a line for its 95 % cluster-bootstrap interval; "
                "positive means the group fares worse. The table after the chart lists the values."
            )
            section.blocks.append(
                Chart(
                    charts.interval_chart(cid, title, summary, pts, "percentage points"),
                    title,
                    summary,
                    Table(f"Data of the chart: {title}", *_group_rows(mg, key_cols)),
                )
            )
        section.blocks.append(
            Table(
                f"Group bias of {model}, arm {arm} (vision, {query_set}): rate of each group "
                "and its difference from all pictures, in points",
                *_group_rows(g, key_cols),
            )
        )
    return section


def _group_rows(g: pd.DataFrame, key_cols: list[str]) -> tuple[list[str], list[list[Cell]], int]:
    rows = []
    for r in g.itertuples():
        k = key_of(r._asdict(), key_cols)
        src = lambda c, k=k: Source("group_bias", c, k)
        rows.append(
            [
                fmt.row_header(_metric_label(r.measure_id)),
                fmt.row_header(r.grouping),
                fmt.row_header(r.group_value),
                fmt.fig(fmt.count(r.n_pairs), src("n_pairs")),
                fmt.fig(fmt.pct(r.rate_pct), src("rate_pct")),
                fmt.fig(fmt.pct(r.rate_all_pct), src("rate_all_pct")),
                fmt.shaded(
                    fmt.signed(r.delta_pct, 1),
                    r.delta_pct,
                    src("delta_pct"),
                    colour=fmt.change_colour(r.delta_pct),
                ),
                _ci_cell(r._asdict(), "ci_low_pct", "ci_high_pct", "group_bias", k, 1),
                fmt.label("yes" if r.small_cell else "no"),
            ]
        )
    return (
        [
            "Measure",
            "Grouping",
            "Group",
            "Pairs",
            "Rate %",
            "Rate over all %",
            "Δ (points)",
            "95 % CI of Δ",
            "Small group",
        ],
        rows,
        3,
    )


# --------------------------------------------------------------------------- mitigation


def _direction(value: Any) -> str:
    return {
        "improved": "\u25bc improved",
        "regressed": "\u25b2 regressed",
        "unchanged": "= unchanged",
    }.get(value, fmt.NA)


def mitigation(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "mitigation",
        "Mitigation",
        "Did a mitigation arm (a prompt, an adapter, DPO) lower the rates, "
        "compared with the baseline on the same pairs?",
    )
    me = m.frame(
        "mitigation_effect",
        "slice = 'overall' and scope in ('all_arms', 'dpo_heldout', 'dpo_unseen') and n_pairs > 0",
        "task, query_set, model_id, measure_id, arm",
    )
    if me.empty:
        section.empty = (
            "The mitigation_effect mart has no matched pairs: add a mitigation arm (a system prompt, an "
            "adapter or a DPO adapter) to the audit config next to `baseline` and rebuild."
        )
        return section
    section.data_statement = data_statement(m, "mitigation_effect", {"slice": "overall"})
    section.blocks.append(
        Paragraph(
            "Each table compares the baseline with every mitigation arm of one model on the same pairs: those counted in "
            "every arm (scope all_arms), or, when a DPO adapter was trained, only those of queries it never trained on "
            "(scope dpo_heldout), or for images, those whose bytes it never trained on (scope dpo_unseen). Rates are of a bad outcome, so a lower rate is better: ▼ improved, ▲ regressed."
        )
    )
    for (task, query_set, model), g in _groups(me, ["task", "query_set", "model_id"]):
        present = set(g.scope)
        scope = next(s for s in ("dpo_unseen", "dpo_heldout", "all_arms") if s in present)
        g = g[g.scope == scope]
        arms = _arms(g.arm)
        kinds = {r.arm: r.arm_kind for r in g.itertuples()}
        idx = {(r.measure_id, r.arm): r for r in g.itertuples()}
        rows = []
        for (measure,), mg in _groups(g, ["measure_id"]):
            base_key = {
                "task": task,
                "model_id": model,
                "query_set": query_set,
                "scope": scope,
                "measure_id": measure,
                "slice": "overall",
            }
            cells = [
                fmt.row_header(_metric_label(measure)),
                fmt.fig(
                    fmt.pct(mg.iloc[0].baseline_rate_pct),
                    Source("mitigation_effect", "baseline_rate_pct", base_key, "distinct"),
                ),
            ]
            for arm in arms:
                r = idx.get((measure, arm))
                if r is None:
                    cells += [fmt.label(fmt.NA)] * 3
                    continue
                k = key_of(
                    r._asdict(),
                    [
                        "task",
                        "model_id",
                        "query_set",
                        "arm",
                        "scope",
                        "measure_id",
                        "slice",
                        "slice_value",
                    ],
                )
                cells += [
                    fmt.fig(fmt.count(r.n_pairs), Source("mitigation_effect", "n_pairs", k)),
                    fmt.fig(
                        fmt.pct(r.arm_rate_pct), Source("mitigation_effect", "arm_rate_pct", k)
                    ),
                    fmt.shaded(
                        fmt.signed(r.change_pct, 1),
                        r.change_pct,
                        Source("mitigation_effect", "change_pct", k),
                        colour=fmt.change_colour(r.change_pct),
                        href=ctx.link(task, query_set, model),
                        link_label=f"{model}, {arm} against baseline, {_metric_label(measure)}: "
                        f"{fmt.signed(r.change_pct, 1)} points, {r.direction}; show the pairs",
                        note=_direction(r.direction),
                    ),
                ]
            rows.append(cells)
        section.blocks.append(
            Table(
                f"Mitigation of {model} ({task}, {query_set}), scope {scope}: rates in %, change in points",
                ["Measure", "Baseline rate %"]
                + [c for _ in arms for c in ("pairs", "rate %", "change")],
                rows,
                row_headers=1,
                column_groups=[("", 2)] + [(f"{a} ({kinds[a]})", 3) for a in arms],
                shaded=True,
                legend=fmt.CHANGE_LEGEND,
                scale="change",
            )
        )
    return section


# --------------------------------------------------------------------------- assistive technology


def assistive_technology(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "assistive",
        "Assistive technology",
        "Does a model recommend technologies that do not serve "
        "the disability in question (a screen reader to a deaf person)?",
    )
    rates = m.frame(
        "assistive_tech_mismatch_rates",
        "n_matched > 0",
        "task, query_set, model_id, arm, disability_group",
    )
    mentions = m.frame(
        "assistive_tech_mentions",
        "condition = 'disability' and n_recommending > 0",
        "task, query_set, model_id, arm, technology_id, disability_group",
    )
    if rates.empty:
        section.empty = (
            "No answer has been matched against the assistive-technology map yet: audit a model and run "
            "`ableaudit build`."
        )
        return section
    section.data_statement = data_statement(
        m, "assistive_tech_mismatch_rates", pairs_column="n_matched"
    )
    section.data_statement = [
        (("Answers per row" if k == "Pairs per row" else k), v) for k, v in section.data_statement
    ]
    key_cols = ["task", "model_id", "arm", "query_set", "disability_group"]
    rows = []
    for r in rates.itertuples():
        k = key_of(r._asdict(), key_cols)
        src = lambda c, k=k: Source("assistive_tech_mismatch_rates", c, k)
        top = r.top_mismatched_technologies
        rows.append(
            [
                fmt.row_header(r.model_id),
                fmt.row_header(r.arm),
                fmt.row_header(r.disability_group),
                fmt.fig(fmt.count(r.n_matched), src("n_matched")),
                fmt.fig(fmt.count(r.n_responses_recommending), src("n_responses_recommending")),
                fmt.fig(
                    fmt.count(r.n_responses_with_any_mismatch), src("n_responses_with_any_mismatch")
                ),
                fmt.shaded(
                    fmt.pct(r.mismatch_pct),
                    r.mismatch_pct,
                    src("mismatch_pct"),
                    colour=fmt.rate_colour(r.mismatch_pct),
                ),
                fmt.label(", ".join(top) if top is not None and len(top) else "none"),
            ]
        )
    section.blocks.append(
        Table(
            "Share of answers recommending a technology that does not serve the disability "
            "(assistive_tech_mismatch_rates)",
            [
                "Model",
                "Arm",
                "Disability",
                "Answers matched",
                "Recommending any",
                "With a mismatch",
                "Mismatch %",
                "Most mismatched technologies",
            ],
            rows,
            row_headers=3,
            shaded=True,
            legend=fmt.RATE_LEGEND,
        )
    )
    if mentions.empty:
        return section
    key_cols = [
        "task",
        "model_id",
        "arm",
        "query_set",
        "condition",
        "disability_group",
        "technology_id",
    ]
    for (task, query_set, model, arm), g in _groups(
        mentions, ["task", "query_set", "model_id", "arm"]
    ):
        if arm != _reference_arm(
            mentions[(mentions.model_id == model) & (mentions.task == task)].arm
        ):
            continue
        groups = sorted(g.disability_group.unique())
        idx = {(r.technology_id, r.disability_group): r for r in g.itertuples()}
        rows = []
        for (tech, name), _ in _groups(g, ["technology_id", "technology_name"]):
            cells = [fmt.row_header(name)]
            for dg in groups:
                r = idx.get((tech, dg))
                if r is None:
                    cells.append(fmt.label(""))
                    continue
                src = Source(
                    "assistive_tech_mentions", "recommend_pct", key_of(r._asdict(), key_cols)
                )
                mismatch = r.fit == "mismatch"
                cells.append(
                    fmt.shaded(
                        fmt.pct(r.recommend_pct),
                        r.recommend_pct,
                        src,
                        colour=fmt.rate_colour(r.recommend_pct) if mismatch else None,
                        href=ctx.link(task, query_set, model, arm=arm, disability=dg),
                        link_label=f"{model}, {name} recommended to {dg}: {fmt.pct(r.recommend_pct)} %, "
                        f"{r.fit}; show the pairs",
                        note=r.fit,
                    )
                )
            rows.append(cells)
        section.blocks.append(
            Table(
                f"Technology x disability for {model}, arm {arm} ({task}): % of answers recommending it, with its fit",
                ["Technology", *groups],
                rows,
                row_headers=1,
                shaded=True,
                legend="Shading: only mismatched cells are shaded, on the cividis scale (pale yellow 0 %, dark blue 100 %); "
                "every cell prints its value and its fit (serves, partial, mismatch) in words.",
            )
        )
    worst = (
        mentions[mentions.fit == "mismatch"]
        .sort_values(["n_recommending", "model_id"], ascending=[False, True])
        .head(15)
    )
    if not worst.empty:
        rows = []
        for r in worst.itertuples():
            k = key_of(r._asdict(), key_cols)
            examples = [
                str(x)
                for x in (r.example_generation_ids if r.example_generation_ids is not None else [])
            ]
            rows.append(
                [
                    fmt.row_header(r.model_id),
                    fmt.row_header(r.arm),
                    fmt.row_header(r.technology_name),
                    fmt.label(r.disability_group),
                    fmt.fig(
                        fmt.count(r.n_recommending),
                        Source("assistive_tech_mentions", "n_recommending", k),
                    ),
                    fmt.fig(
                        fmt.pct(r.recommend_pct),
                        Source("assistive_tech_mentions", "recommend_pct", k),
                    ),
                    Cell(
                        text=f"first of {len(examples)} examples" if examples else "none",
                        href=ctx.link(r.task, r.query_set, r.model_id, gen=examples[0])
                        if examples
                        else None,
                        link_label=f"first of {len(examples)} examples: an answer of {r.model_id} recommending "
                        f"{r.technology_name} to {r.disability_group}"
                        if examples
                        else None,
                    ),
                ]
            )
        section.blocks.append(
            Table(
                "The most mismatched recommendations: technologies recommended most often to a "
                "disability they do not serve",
                [
                    "Model",
                    "Arm",
                    "Technology",
                    "Disability",
                    "Answers recommending",
                    "% of answers",
                    "Examples",
                ],
                rows,
                row_headers=3,
            )
        )
    return section


# --------------------------------------------------------------------------- trust


def trust(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "trust",
        "Trust: judges, agreement and data quality",
        "Can the numbers above be trusted: how readable were the judges, do they agree with people, "
        "and what was excluded?",
    )
    jq = m.frame("judgment_quality", "", "judge_kind, judge_name, prompt_version")
    ag = m.frame("agreement", "", "dimension, kind_pair, rater_a, rater_b")
    aa = m.frame("annotator_agreement", "", "dimension, rater_kind")
    dq = m.frame(
        "data_quality",
        "area in ('generation', 'pair')",
        "task, model_id, arm, run_id, area, status",
    )
    rr = m.frame(
        "refusal_rates",
        "source = 'any' and disability_group in ('neutral', 'all')",
        "task, query_set, model_id, arm, condition",
    )
    section.data_statement = data_statement(m, "data_quality", pairs_column="__none__")
    section.blocks.append(Heading("Judge quality"))
    if jq.empty:
        section.blocks.append(
            Paragraph(
                "No judge verdict was landed: add `judges` to the audit config (or import "
                "verdicts) to judge the answers."
            )
        )
    else:
        cols = [
            ("n_verdicts", fmt.count),
            ("n_parsed", fmt.count),
            ("n_repaired", fmt.count),
            ("n_unparseable", fmt.count),
            ("n_call_errors", fmt.count),
            ("usable_pct", fmt.pct),
            ("n_spans_not_found", fmt.count),
        ]
        rows = []
        for r in jq.itertuples():
            k = key_of(
                r._asdict(),
                [
                    "judge_name",
                    "judge_model",
                    "judge_revision",
                    "judge_kind",
                    "prompt_version",
                    "source",
                ],
            )
            rows.append(
                [
                    fmt.row_header(r.judge_name),
                    fmt.row_header(r.judge_kind),
                    fmt.label(r.judge_model),
                    fmt.label(r.prompt_version),
                ]
                + [fmt.fig(f(getattr(r, c)), Source("judgment_quality", c, k)) for c, f in cols]
            )
        section.blocks.append(
            Table(
                "How readable each judge's output was (judgment_quality)",
                [
                    "Judge",
                    "Kind",
                    "Model",
                    "Prompt",
                    "Verdicts",
                    "Parsed",
                    "Repaired",
                    "Unparseable",
                    "Call errors",
                    "Usable %",
                    "Quoted spans not found",
                ],
                rows,
                row_headers=2,
            )
        )
    section.blocks.append(Heading("Agreement"))
    if ag.empty:
        section.blocks.append(
            Paragraph(
                "No two raters rated the same items: import human ratings "
                "(`ableaudit import annotations`) or train a detector to fill the agreement tables."
            )
        )
    else:
        rows = []
        for r in ag.itertuples():
            k = key_of(r._asdict(), ["dimension", "rater_a", "rater_b"])
            src = lambda c, k=k: Source("agreement", c, k)
            rows.append(
                [
                    fmt.row_header(r.kind_pair),
                    fmt.row_header(r.dimension),
                    fmt.row_header(r.rater_a),
                    fmt.row_header(r.rater_b),
                    fmt.fig(fmt.count(r.n_items), src("n_items")),
                    fmt.fig(fmt.number(r.spearman_rho), src("spearman_rho")),
                    fmt.fig(fmt.number(r.cohen_kappa), src("cohen_kappa")),
                    fmt.fig(fmt.number(r.kappa_quadratic), src("kappa_quadratic")),
                    fmt.fig(fmt.number(r.accuracy), src("accuracy")),
                    fmt.label(r.reason if not fmt.missing(r.reason) else ""),
                ]
            )
        section.blocks.append(
            Table(
                "Agreement of two raters: judge vs human, detector vs judge, human vs human "
                "(agreement)",
                [
                    "Comparison",
                    "Dimension",
                    "Rater A",
                    "Rater B",
                    "Items",
                    "Spearman rho",
                    "Cohen's kappa",
                    "Quadratic kappa",
                    "Exact agreement",
                    "Why a value is missing",
                ],
                rows,
                row_headers=4,
            )
        )
        if not aa.empty:
            rows = []
            for r in aa.itertuples():
                k = key_of(r._asdict(), ["dimension", "rater_kind"])
                src = lambda c, k=k: Source("annotator_agreement", c, k)
                rows.append(
                    [
                        fmt.row_header(r.rater_kind),
                        fmt.row_header(r.dimension),
                        fmt.fig(fmt.count(r.n_annotators), src("n_annotators")),
                        fmt.fig(fmt.count(r.n_items), src("n_items")),
                        fmt.fig(fmt.number(r.fleiss_kappa), src("fleiss_kappa")),
                        fmt.fig(fmt.number(r.krippendorff_alpha), src("krippendorff_alpha")),
                        fmt.label(r.reason if not fmt.missing(r.reason) else ""),
                    ]
                )
            section.blocks.append(
                Table(
                    "Agreement of all raters of one kind (annotator_agreement)",
                    [
                        "Raters",
                        "Dimension",
                        "Raters counted",
                        "Items",
                        "Fleiss' kappa",
                        "Krippendorff's alpha",
                        "Why a value is missing",
                    ],
                    rows,
                    row_headers=2,
                )
            )
    section.blocks.append(Heading("Data quality"))
    if dq.empty:
        section.blocks.append(Paragraph("The data_quality mart is empty: nothing has landed yet."))
    else:
        statuses = {
            area: sorted(dq[dq.area == area].status.unique()) for area in ("generation", "pair")
        }
        idx = {
            (r.run_id, r.task, r.model_id, r.arm, r.query_set, r.area, r.status): r
            for r in dq.itertuples()
        }
        rows = []
        for (task, model, arm, query_set, run), _ in _groups(
            dq, ["task", "model_id", "arm", "query_set", "run_id"]
        ):
            run = _none(run)
            cells = [
                fmt.row_header(model),
                fmt.row_header(arm),
                fmt.row_header(task),
                fmt.row_header(run or "none"),
            ]
            for area in ("generation", "pair"):
                for st in statuses[area]:
                    r = idx.get((run, task, model, arm, query_set, area, st))
                    cells.append(
                        fmt.label("0")
                        if r is None
                        else fmt.fig(
                            fmt.count(r.n_rows),
                            Source(
                                "data_quality",
                                "n_rows",
                                key_of(
                                    r._asdict(),
                                    [
                                        "run_id",
                                        "task",
                                        "model_id",
                                        "arm",
                                        "query_set",
                                        "area",
                                        "status",
                                    ],
                                ),
                            ),
                        )
                    )
            rows.append(cells)
        section.blocks.append(
            Table(
                "Generations and pairs by status, per model, arm and run (data_quality; a 0 means no row has that status)",
                ["Model", "Arm", "Task", "Run"]
                + [st for a in ("generation", "pair") for st in statuses[a]],
                rows,
                row_headers=4,
                column_groups=[("", 4)]
                + [(f"{a}s", len(statuses[a])) for a in ("generation", "pair") if statuses[a]],
            )
        )
        section.blocks.append(
            Paragraph(
                "Data quality: every exclusion, by area, metric and status", "data-quality.html"
            )
        )
    if not rr.empty:
        rows = []
        for (task, _query_set, model, arm), g in _groups(
            rr, ["task", "query_set", "model_id", "arm"]
        ):
            cells = [fmt.row_header(model), fmt.row_header(arm), fmt.row_header(task)]
            for group in ("neutral", "all"):
                x = g[g.disability_group == group]
                if x.empty:
                    cells += [fmt.label(fmt.NA)] * 2
                    continue
                r = x.iloc[0]
                k = key_of(
                    r,
                    [
                        "task",
                        "model_id",
                        "arm",
                        "query_set",
                        "condition",
                        "disability_group",
                        "source",
                    ],
                )
                cells += [
                    fmt.fig(fmt.count(r.n_assessed), Source("refusal_rates", "n_assessed", k)),
                    fmt.fig(fmt.pct(r.refusal_pct), Source("refusal_rates", "refusal_pct", k)),
                ]
            rows.append(cells)
        section.blocks.append(
            Table(
                "Refusals by any source, neutral against disability-aware prompts (refusal_rates)",
                ["Model", "Arm", "Task", "answers", "refused %", "answers", "refused %"],
                rows,
                row_headers=3,
                column_groups=[("", 3), ("neutral prompts", 2), ("disability-aware prompts", 2)],
            )
        )
    return section


def data_quality_rows(dq: pd.DataFrame) -> list[list[Cell]]:
    """Every data_quality row, for the page of every exclusion."""
    rows = []
    for r in dq.itertuples():
        k = key_of(
            r._asdict(),
            ["run_id", "task", "model_id", "arm", "query_set", "area", "metric", "status"],
        )
        rows.append(
            [
                fmt.row_header(r.model_id),
                fmt.row_header(r.arm),
                fmt.row_header(r.task),
                fmt.row_header(_none(r.run_id) or "none"),
                fmt.row_header(r.area),
                fmt.row_header(_none(r.metric) or "none"),
                fmt.row_header(r.status),
                fmt.fig(fmt.count(r.n_rows), Source("data_quality", "n_rows", k)),
            ]
        )
    return rows


BUILDERS = (
    release_gates,
    headline,
    shaded_tables,
    sensitivity,
    scaling,
    significance,
    robustness,
    vision,
    mitigation,
    assistive_technology,
    trust,
)


def build_sections(ctx: Context) -> list[Section]:
    """Every section, in the report's order (the release gates only when there are verdicts)."""
    return [section for builder in BUILDERS if (section := builder(ctx)) is not None]


def json_dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
