"""The shaded tables: each rate per model and arm, shaded against the baseline, with its n and interval, and the heterogeneity tests."""

from __future__ import annotations

import pandas as pd

from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Cell,
    Heading,
    Paragraph,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import (
    BASELINE,
    DIMENSIONS,
    Context,
    ci_cell,
    data_statement,
    key_of,
    metric_label,
)


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
        desc = f"degraded on {metric_label(measure)}"
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
        # the accessible name starts with the cell's visible text (WCAG 2.5.3, label in name)
        link_label=f"{fmt.pct(rate)} n {fmt.count(n)} {interval}: {what}, {fmt.pct(rate)} % of "
        f"{fmt.count(n)} pairs {desc}, 95 % interval {interval}; show the pairs",
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
                fmt.row_header(metric_label(r.metric)),
                fmt.fig(fmt.pvalue(r.p_value), src("p_value")),
                fmt.label(r.worst_level),
                fmt.fig(fmt.pct(r.worst_pct), src("worst_pct")),
                fmt.label(r.best_level),
                fmt.fig(fmt.pct(r.best_pct), src("best_pct")),
                fmt.fig(fmt.pct(r.gap_pct), src("gap_pct")),
                ci_cell(r._asdict(), "gap_ci_low", "gap_ci_high", "heterogeneity", k, 1, False),
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
                    f"{model}, {arm}, {metric_label(ms)}",
                )
                for ms in measures
            ]
            for model, arm in units
        ]
        section.blocks.append(
            Table(
                caption=f"Model x metric: rate in % ({task}, {query_set}; all pairs of each model and arm)",
                columns=["Model", "Arm", *map(metric_label, measures)],
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
                            f"{model}, {arm}, {metric_label(ms)}, {label} {v}",
                            **{filter_name: v},
                        )
                        for v in values
                    ]
                    for model, arm in units
                ]
                section.blocks.append(
                    Table(
                        caption=f"Model x {label}, {metric_label(ms)}: rate in % ({task}, {query_set})",
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
                            f"{model}, {arm}, disability {v}, {metric_label(ms)}",
                            disability=v,
                        )
                        for ms in measures
                    ]
                    for v in values
                ]
                section.blocks.append(
                    Table(
                        caption=f"Disability x metric for {model}, arm {arm}: rate in % (vision, {query_set})",
                        columns=["Disability", *map(metric_label, measures)],
                        rows=rows,
                        row_headers=1,
                        shaded=True,
                        legend=fmt.RATE_LEGEND,
                    )
                )
    return section
