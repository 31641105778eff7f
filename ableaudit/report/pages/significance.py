"""The significance page: whether the shift between neutral and disability-aware scores is more than chance."""

from __future__ import annotations

import pandas as pd

from ableaudit.report import charts
from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Cell,
    Chart,
    Paragraph,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import (
    Context,
    Names,
    ci_cell,
    data_statement,
    grouped,
    key_of,
    metric_label,
    reference_arm,
)


def significance_rows(sig: pd.DataFrame, names: Names | None = None) -> list[list[Cell]]:
    """The rows of significance tables, metrics and disabilities by display name with ``names``."""
    label = names.metric if names else metric_label
    disability = names.disability if names else str
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
                fmt.row_header(label(r.metric)),
                fmt.row_header(
                    r.slice
                    if r.slice == "overall"
                    else f"disability {disability(r.slice_value)}"
                    if r.slice == "disability"
                    else f"{r.slice} {r.slice_value}"
                ),
                fmt.fig(fmt.count(r.n_pairs), src("n_pairs")),
                fmt.fig(fmt.number(r.mean_neutral, 3), src("mean_neutral")),
                fmt.fig(fmt.number(r.mean_disability, 3), src("mean_disability")),
                fmt.fig(fmt.signed(r.mean_diff, 3), src("mean_diff")),
                ci_cell(r._asdict(), "ci_low", "ci_high", "significance", k, 3),
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
    for (task, query_set), g in grouped(overall, ["task", "query_set"]):
        arm = reference_arm(g.arm)
        for (metric,), mg in grouped(g[(g.arm == arm) & g.ci_low.notna()], ["metric"]):
            rows = [
                (f"{r.model_id}", float(r.mean_diff), float(r.ci_low), float(r.ci_high))
                for r in mg.itertuples()
            ]
            cid = ctx.next_id()
            title = f"Mean shift with 95 % interval: {ctx.names.metric(metric)} ({task}, arm {arm})"
            summary = (
                f"For each of {len(rows)} models a dot at the mean shift (disability-aware minus neutral) and a "
                "line for its 95 % bootstrap interval, with a vertical line at zero; the table after the chart "
                "lists the values."
            )
            section.blocks.append(
                Chart(
                    charts.interval_chart(
                        cid, title, summary, rows, f"shift in {ctx.names.metric(metric)} units"
                    ),
                    title,
                    summary,
                    Table(
                        f"Data of the chart: {title}",
                        SIG_COLUMNS,
                        significance_rows(mg, ctx.names),
                        row_headers=4,
                    ),
                )
            )
        section.blocks.append(
            Table(
                f"Paired tests, overall ({task}, {query_set})",
                SIG_COLUMNS,
                significance_rows(g, ctx.names),
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
                    fmt.row_header(ctx.names.metric(r.metric)),
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
