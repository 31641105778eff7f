"""The scaling page: whether degradation grows or shrinks with model size."""

from __future__ import annotations

from ableaudit.report import charts
from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Chart,
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
                fmt.row_header(ctx.names.metric(r.metric)),
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
        for (task, query_set), g in grouped(sc[sc.n_models > 0], ["task", "query_set"]):
            arm = reference_arm(g.arm)
            pts = deg[(deg.task == task) & (deg.query_set == query_set) & (deg.arm == arm)].merge(
                sizes, on="model_id"
            )
            if pts.empty:
                continue
            series = {
                ctx.names.metric(metric): [
                    (r.model_id, float(r.params_b), float(r.degradation_pct))
                    for r in x.itertuples()
                ]
                for (metric,), x in grouped(pts, ["metric"])
            }
            chart_rows = [
                [
                    fmt.row_header(ctx.names.metric(r.metric)),
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
