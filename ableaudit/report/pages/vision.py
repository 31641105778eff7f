"""The vision page: interpretive shift when a disability is mentioned, and group bias by who is pictured."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ableaudit.report import charts
from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Cell,
    Chart,
    Heading,
    Paragraph,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import (
    DIMENSIONS,
    Context,
    ci_cell,
    data_statement,
    dimensions_in,
    grouped,
    key_of,
    metric_label,
    none_if_missing,
)


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
        for (query_set, judge), g in grouped(shift, ["query_set", "judge_name"]):
            idx = {(r.model_id, r.arm, r.slice_value, r.dimension): r for r in g.itertuples()}
            dims = dimensions_in(g)
            rows = []
            for (model, arm, value), _ in grouped(g, ["model_id", "arm", "slice_value"]):
                cells = [
                    fmt.row_header(model),
                    fmt.row_header(arm),
                    fmt.row_header("all" if value == "all" else ctx.names.disability(value)),
                ]
                for dim in dims:
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
                    interval = fmt.interval(r.rate_ci_low_pct, r.rate_ci_high_pct, 1, sign=False)
                    # a disability row is shaded only where its interval separates from the
                    # model's overall rate (vs_overall); the overall row is that reference
                    vs = None if value == "all" or fmt.missing(r.vs_overall) else r.vs_overall
                    cells += [
                        fmt.shaded(
                            fmt.pct(r.yes_pct),
                            r.yes_pct,
                            Source("interpretive_shift", "yes_pct", k),
                            colour=fmt.support_colour(vs),
                            href=ctx.link("vision", query_set, model, arm=arm, **filters),
                            link_label=f"{fmt.pct(r.yes_pct)} {interval}: {model}, {arm}, {ctx.names.disability(value)}, {dim}: "
                            f"{fmt.pct(r.yes_pct)} % Yes, 95 % interval {interval}"
                            + (
                                f", wholly {vs} the overall rate"
                                if vs in ("above", "below")
                                else ""
                            )
                            + "; show the pairs",
                            note=vs if vs in ("above", "below") else None,
                            more=(
                                (
                                    " ",
                                    interval,
                                    None  # one query gives every pair: 'n/a'
                                    if interval == fmt.NA
                                    else Source(
                                        "interpretive_shift", "rate_ci_low_pct|rate_ci_high_pct", k
                                    ),
                                ),
                            ),
                        ),
                        fmt.fig(
                            fmt.count(r.n_pairs_judged),
                            Source("interpretive_shift", "n_pairs_judged", k),
                        ),
                    ]
                rows.append(cells)
            section.blocks.append(
                Table(
                    (
                        "Interpretive shift, stereotype, framing and abstention"
                        if dims == list(DIMENSIONS)
                        else f"The dimensions of {judge}"
                    )
                    + f" per model and disability: % of judged pairs labelled Yes by {judge} with its 95 % interval, and "
                    f"pairs judged (vision, {query_set})",
                    ["Model", "Arm", "Disability"] + [c for _ in dims for c in ("Yes %", "pairs")],
                    rows,
                    row_headers=3,
                    column_groups=[("", 3)] + [(d, 2) for d in dims],
                    shaded=True,
                    legend=fmt.SUPPORT_LEGEND,
                    scale="support",
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
    for (query_set, model, arm), g in grouped(gb, ["query_set", "model_id", "arm"]):
        judge_measures = g[g.measure_kind == "judge"]
        for (measure,), mg in grouped(
            judge_measures[judge_measures.measure.isin(["interpret"])], ["measure_id"]
        ):
            pts = [
                (
                    f"{r.grouping}: {r.group_value}",
                    float(r.delta_pct),
                    none_if_missing(r.ci_low_pct),
                    none_if_missing(r.ci_high_pct),
                )
                for r in mg.itertuples()
                if fmt.is_finite(r.delta_pct)
            ]
            if not pts:
                continue
            cid = ctx.next_id()
            title = f"Δ(Group − All) of {ctx.names.metric(measure)} with 95 % interval: {model}, arm {arm}"
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
                    Table(
                        f"Data of the chart: {title}", *_group_rows(mg, key_cols, ctx.names.metric)
                    ),
                )
            )
        section.blocks.append(
            Table(
                f"Group bias of {model}, arm {arm} (vision, {query_set}): rate of each group "
                "and its difference from all pictures, in points",
                *_group_rows(g, key_cols, ctx.names.metric),
            )
        )
    return section


def _group_rows(
    g: pd.DataFrame, key_cols: list[str], label: Callable[[str], str] = metric_label
) -> tuple[list[str], list[list[Cell]], int]:
    rows = []
    for r in g.itertuples():
        k = key_of(r._asdict(), key_cols)
        src = lambda c, k=k: Source("group_bias", c, k)
        rows.append(
            [
                fmt.row_header(label(r.measure_id)),
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
                ci_cell(r._asdict(), "ci_low_pct", "ci_high_pct", "group_bias", k, 1),
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
