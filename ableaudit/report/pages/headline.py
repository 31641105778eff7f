"""The headline page: how often the disability-aware answer is worse, per model, arm and metric."""

from __future__ import annotations

from ableaudit.report import format as fmt
from ableaudit.report.pages.scorer_bias import masked_blocks
from ableaudit.report.pages.shaded import heterogeneity_table
from ableaudit.report.records import (
    Paragraph,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import (
    ALPHA,
    Context,
    ci_cell,
    data_statement,
    grouped,
    key_of,
)


def headline(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "headline",
        "Headline: how often is the disability-aware answer worse?",
        "Per model, arm and metric: the share of pairs whose disability-aware answer scores worse than "
        "the neutral one, with the shift in the metric's own units, its 95 % interval and whether it "
        "is significant after Holm's correction; then whether the disability categories differ, the worst one's "
        "gap to the best with its interval and the smallest gap the audit could detect.",
    )
    deg = m.frame("degradation", "slice = 'overall'", "task, query_set, model_id, arm, metric")
    sig = m.frame("significance", "slice = 'overall'")
    het = m.frame("heterogeneity")
    if deg.empty:
        section.empty = (
            "The degradation mart is empty: land generations (an audit or `ableaudit import responses`) "
            "and run `ableaudit build` to fill it."
        )
        return section
    section.data_statement = data_statement(m, "degradation", {"slice": "overall"})
    section.blocks.append(
        Paragraph(
            "Each rate carries its 95 % interval counting each query once (degradation mart, rate_ci_low_pct and "
            "rate_ci_high_pct: Wilson's at the effective number of pairs where a query's pairs share its neutral "
            "answer); the shift's interval is the bootstrap interval of the mean shift (significance mart), "
            "resampling whole queries. "
            "'Significant' means "
            f"Holm-adjusted p < {ALPHA} for the t-test of the per-query mean shifts (each query counts once, "
            "however many pairs share its neutral answer) AND a shift interval that excludes 0 "
            "(significance mart, column significant)."
        )
    )
    sig_key = ["task", "model_id", "arm", "query_set", "metric"]
    sig_rows = {tuple(r[c] for c in sig_key): r for _, r in sig.iterrows()} if not sig.empty else {}
    for (task, query_set), g in grouped(deg, ["task", "query_set"]):
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
                    fmt.row_header(ctx.names.metric(r.metric)),
                    fmt.shaded(
                        fmt.pct(r.degradation_pct),
                        r.degradation_pct,
                        src("degradation_pct"),
                        # not shaded: rates of different models and metrics are not ranked by colour
                        # (the shaded tables shade a slice only against its model's overall rate)
                        colour=None,
                        href=ctx.link(task, query_set, r.model_id, arm=r.arm),
                        link_label=f"{fmt.pct(r.degradation_pct)}: {r.model_id}, {r.arm}, {ctx.names.metric(r.metric)}, "
                        f"{fmt.pct(r.degradation_pct)} % of {fmt.count(r.n_pairs)} pairs degraded; show the pairs",
                    ),
                    ci_cell(
                        r,
                        "rate_ci_low_pct",
                        "rate_ci_high_pct",
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
                    ci_cell(s, "ci_low", "ci_high", "significance", sk)
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
                f"No pair was counted for {'; '.join(map(ctx.names.metric, empty_metrics))}: every pair was excluded "
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
                note=note,
            )
        )
        # do the disability categories differ? (mart heterogeneity; a block of its own)
        differ = heterogeneity_table(
            het, task, query_set, "disability", "disability", where="Headline: ", names=ctx.names
        )
        if differ is not None:
            section.blocks.append(differ)
    section.blocks += masked_blocks(ctx)
    return section
