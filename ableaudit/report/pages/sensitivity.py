"""The threshold sensitivity page: whether the degradation rate holds at other thresholds."""

from __future__ import annotations

from ableaudit.report import charts
from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Chart,
    Heading,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import (
    Context,
    data_statement,
    grouped,
    key_of,
    reference_arm,
)


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
    for (task, query_set), g in grouped(ts, ["task", "query_set"]):
        thresholds = sorted(g.threshold.unique())
        idx = {(r.model_id, r.arm, r.metric, r.threshold): r for r in g.itertuples()}
        rows = []
        for (model, arm, metric), _ in grouped(g, ["model_id", "arm", "metric"]):
            cells = [
                fmt.row_header(model),
                fmt.row_header(arm),
                fmt.row_header(ctx.names.metric(metric)),
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
        arm = reference_arm(g.arm)
        for metric, mg in grouped(g[g.arm == arm], ["metric"]):
            series = {
                model: [(float(r.threshold), float(r.degradation_pct)) for r in x.itertuples()]
                for (model,), x in grouped(mg, ["model_id"])
            }
            chart_table = Table(
                caption=f"Data of the chart: degradation rate (%) by threshold, {ctx.names.metric(metric[0])}, arm {arm}",
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
            title = f"Degradation rate against threshold: {ctx.names.metric(metric[0])} ({task}, arm {arm})"
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
