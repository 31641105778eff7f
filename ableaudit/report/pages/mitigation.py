"""The mitigation page: whether a mitigation arm (a prompt, an adapter, DPO) lowered the rates."""

from __future__ import annotations

from typing import Any

from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Paragraph,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import (
    Context,
    data_statement,
    grouped,
    key_of,
    ordered_arms,
)


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
    for (task, query_set, model), g in grouped(me, ["task", "query_set", "model_id"]):
        present = set(g.scope)
        scope = next(s for s in ("dpo_unseen", "dpo_heldout", "all_arms") if s in present)
        g = g[g.scope == scope]
        arms = ordered_arms(g.arm)
        kinds = {r.arm: r.arm_kind for r in g.itertuples()}
        idx = {(r.measure_id, r.arm): r for r in g.itertuples()}
        rows = []
        for (measure,), mg in grouped(g, ["measure_id"]):
            base_key = {
                "task": task,
                "model_id": model,
                "query_set": query_set,
                "scope": scope,
                "measure_id": measure,
                "slice": "overall",
            }
            cells = [
                fmt.row_header(ctx.names.metric(measure)),
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
                        link_label=f"{model}, {arm} against baseline, {ctx.names.metric(measure)}: "
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
