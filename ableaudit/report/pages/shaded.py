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
    FAMILIES,
    Context,
    Names,
    ci_cell,
    data_statement,
    dimensions_in,
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
            dims += [f"{d}:{judge}" for d in dimensions_in(shift[shift.judge_name == judge])]
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
        outcome = "yes"
    else:
        r = deg_idx.get((task, query_set, model, arm, measure, slice_, value))
        if r is None:
            return fmt.label(fmt.NA)
        k = key_of(r, ["task", "model_id", "arm", "query_set", "metric", "slice", "slice_value"])
        rate, n, relation, column = r.degradation_pct, r.n_pairs, "degradation", "degradation_pct"
        desc = f"degraded on {ctx.names.metric(measure)}"
        outcome = "degraded"
    interval = fmt.interval(r.rate_ci_low_pct, r.rate_ci_high_pct, 1, sign=False)
    more = (
        (" n ", fmt.count(n), Source(relation, _RATE_N[relation], k)),
        # no interval where one query gives every pair (rate_ci_method 'one_query'): 'n/a'
        (
            " ",
            interval,
            None if interval == fmt.NA else Source(relation, "rate_ci_low_pct|rate_ci_high_pct", k),
        ),
    )
    # a slice is shaded only where its interval separates from its model's overall rate
    # (the mart's vs_overall); an overall cell is that reference, and is not shaded
    vs = None if slice_ == "overall" or fmt.missing(r.vs_overall) else r.vs_overall
    against = f", its interval {_VS_WORDS[vs]} the model's overall rate" if vs else ""
    return fmt.shaded(
        fmt.pct(rate),
        rate,
        Source(relation, column, k),
        colour=fmt.support_colour(vs),
        href=ctx.link(task, query_set, model, arm=arm, **filters, metric=measure, outcome=outcome),
        # the accessible name starts with the cell's visible text (WCAG 2.5.3, label in name)
        link_label=f"{fmt.pct(rate)} n {fmt.count(n)} {interval}: {what}, {fmt.pct(rate)} % of "
        f"{fmt.count(n)} pairs {desc}, 95 % interval {interval} "
        f"({_METHOD_WORDS.get(r.rate_ci_method, 'none')}){against}; show the pairs",
        note=vs if vs in ("above", "below") else None,
        more=more,
    )


_RATE_N = {"degradation": "n_pairs", "interpretive_shift": "n_pairs_judged"}
_VS_WORDS = {"above": "wholly above", "below": "wholly below", "within": "containing"}
_METHOD_WORDS = {
    "wilson": "Wilson, one pair per query",
    "wilson_design_effect": "Wilson at the effective number of pairs, each query counted once",
    "one_query": "none: one query gives every pair",
}
_METHOD_NOTES = {
    "wilson": "Wilson's (each query gives one pair)",
    "wilson_design_effect": (
        "Wilson's at the effective number of pairs with Student's t over the queries "
        "(a query gives several pairs, which share its neutral answer)"
    ),
    "one_query": "none, n/a (one query gives every pair: no spread between queries to estimate it from)",
}


def _shown(d: pd.DataFrame, s: pd.DataFrame, measure: str, slices: tuple[str, ...]) -> pd.DataFrame:
    """The mart rows behind a table's cells of one measure (for its note on intervals)."""
    if ":" in measure and not measure.startswith("judge_score:"):
        if s.empty:
            return s
        dim, judge = measure.split(":", 1)
        return s[(s.judge_name == judge) & (s.dimension == dim) & s.slice.isin(slices)]
    return d[(d.metric == measure) & d.slice.isin(slices)]


def _interval_note(rows: pd.DataFrame) -> str | None:
    """Which interval the table's cells print (the marts' rate_ci_method), in words."""
    if rows.empty or "rate_ci_method" not in rows:
        return None
    methods = [m for m in _METHOD_NOTES if (rows.rate_ci_method == m).any()]
    if not methods:
        return None
    return "95 % intervals: " + "; ".join(_METHOD_NOTES[m] for m in methods) + "."


HETEROGENEITY_KEY = ["task", "model_id", "arm", "query_set", "metric", "factor"]


def heterogeneity_table(
    het: pd.DataFrame,
    task: str,
    query_set: str,
    factor: str,
    label: str,
    where: str = "",
    names: Names | None = None,
) -> Table | None:
    """Do the rates of one factor's levels differ at all? The heterogeneity mart's test, the worst
    and best level, the gap's interval and the smallest gap 80 % power detects, per model, arm
    and metric (also the headline's, for the disability categories)."""
    if het.empty:
        return None
    h = het[(het.task == task) & (het.query_set == query_set) & (het.factor == factor)]
    if h.empty:
        return None
    rows = []
    metric = names.metric if names else metric_label
    level = (
        (lambda v: v if fmt.missing(v) else names.disability(v))
        if names and factor == "disability"
        else (lambda v: v)
    )
    for r in h.sort_values(["model_id", "arm", "metric"]).itertuples():
        k = key_of(r._asdict(), HETEROGENEITY_KEY)
        src = lambda col, k=k: Source("heterogeneity", col, k)
        rows.append(
            [
                fmt.row_header(r.model_id),
                fmt.row_header(r.arm),
                fmt.row_header(metric(r.metric)),
                fmt.fig(fmt.pvalue(r.p_value), src("p_value")),
                fmt.label(level(r.worst_level)),
                fmt.fig(fmt.pct(r.worst_pct), src("worst_pct")),
                fmt.label(level(r.best_level)),
                fmt.fig(fmt.pct(r.best_pct), src("best_pct")),
                fmt.fig(fmt.pct(r.gap_pct), src("gap_pct")),
                ci_cell(r._asdict(), "gap_ci_low", "gap_ci_high", "heterogeneity", k, 1, False),
                fmt.fig(fmt.number(r.min_detectable_gap_pct, 1), src("min_detectable_gap_pct")),
            ]
        )
    test = (
        "Cochran's Q on the pairs of each neutral answer"
        if factor == "disability"
        else ("one-way ANOVA of the per-query rates")
    )
    return Table(
        # `where` names the copy the headline shows: a caption names one table of the page
        caption=f"{where}Do the {label} rates differ? ({task}, {query_set}; {test})",
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
            "Smallest gap detected with 80 % power (points)",
        ],
        rows=rows,
        row_headers=3,
    )


def shaded_tables(ctx: Context) -> Section:
    m = ctx.marts
    names = ctx.names
    section = Section(
        "shaded",
        "The papers' shaded tables",
        "Where is the disability-aware answer worse: per model and family of metrics, each metric's "
        "rate over all pairs, per disability and per domain?",
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
            "One table per model and family of metrics; a row per metric and arm, a column for all pairs, "
            "each disability and each domain. Cells print the rate in %: for a metric, the share of counted "
            "pairs whose disability-aware answer is degraded (Eq. 1); for a judge dimension (interpret, "
            "stereotype, framing, abstain, or one of a judge's own dimension set), the share of judged pairs "
            "the contrastive judge labels Yes; then n, the pairs counted, and the rate's 95 % interval. Where "
            "a query gives several pairs of a cell (its neutral answer is shared by the categories of a domain "
            "cell, or it was asked at several temperatures or samples) the interval counts each query once "
            "(Wilson's at the effective number of pairs, with Student's t over the queries); where each query "
            "gives one pair it is Wilson's; the note under each table says which. The column of all pairs is "
            "the reference and is not shaded. A disability or domain cell is shaded only where its whole "
            "interval lies above (dark, 'above') or below (pale, 'below') the rate of all pairs of its "
            "model, arm and metric; a cell whose interval contains that rate is not shaded, whatever its "
            "printed rate. Whether the categories or domains differ at all is the test after the tables "
            "(heterogeneity mart). Each cell links to the pairs of its slice that the metric finds "
            "degraded (or the judge labels Yes). A label's hover text gives its id in the marts."
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
        units = pd.concat([d[["model_id", "arm"]], s[["model_id", "arm"]]]).drop_duplicates()
        slices = {
            slice_: sorted(
                set(d[d.slice == slice_].slice_value)
                | set(s[s.slice == slice_].slice_value if not s.empty else [])
            )
            for slice_ in ("disability", "domain")
        }
        slices["disability"] = names.sorted_disabilities(slices["disability"])
        columns = [("overall", "all")] + [(sl, v) for sl in slices for v in slices[sl]]
        section.blocks.append(Heading(f"{task.capitalize()} models, query set {query_set}"))
        for model in sorted(units.model_id.unique()):
            arms = sorted(units[units.model_id == model].arm, key=lambda a: (a != BASELINE, a))
            for family, title in FAMILIES:
                shown = [ms for ms in measures if names.family(ms) == family]
                if not shown:
                    continue
                rows = [
                    [_labelled(names.metric(ms), ms), fmt.row_header(arm)]
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
                            f"{model}, {arm}, {names.metric(ms)}, "
                            + ("all pairs" if slice_ == "overall" else _value(names, slice_, v)),
                            **({} if slice_ == "overall" else {slice_: v}),
                        )
                        for slice_, v in columns
                    ]
                    for ms in shown
                    for arm in arms
                ]
                rows_shown = pd.concat(
                    [_shown(d, s, ms, ("overall", "disability", "domain")) for ms in shown]
                )
                section.blocks.append(
                    Table(
                        caption=f"{model}, {title.lower()}: rate in % over all pairs, per disability and "
                        f"per domain ({task}, {query_set})",
                        columns=[
                            "Metric",
                            "Arm",
                            "All pairs",
                            *(_value(names, sl, v) for sl, v in columns[1:]),
                        ],
                        column_ids=[None, None, None, *(v for _, v in columns[1:])],
                        rows=rows,
                        row_headers=2,
                        column_groups=[("", 3)]
                        + [(sl.capitalize(), len(vs)) for sl, vs in slices.items() if vs],
                        shaded=True,
                        legend=fmt.SUPPORT_LEGEND,
                        scale="support",
                        note=_interval_note(
                            rows_shown[rows_shown.model_id == model]
                            if not rows_shown.empty
                            else rows_shown
                        ),
                    )
                )
        for slice_ in ("disability", "domain"):
            if slices[slice_]:
                differ = heterogeneity_table(het, task, query_set, slice_, slice_, names=names)
                if differ is not None:
                    section.blocks.append(differ)
    return section


def _value(names: Names, slice_: str, value: str) -> str:
    """A slice value as the tables label it: a disability by its display name."""
    return names.disability(value) if slice_ == "disability" else value


def _labelled(text: str, ident: str) -> Cell:
    """A row header printing a display name, with the id of the marts as its hover text."""
    return Cell(text=text, header=True, title=None if text == ident else ident)
