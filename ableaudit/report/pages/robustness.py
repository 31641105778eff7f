"""The robustness page: how much the rates move across repeated samples and sampling temperatures."""

from __future__ import annotations

from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import Context, data_statement, grouped, key_of


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
    for (task, query_set), g in grouped(rb, ["task", "query_set"]):
        runs = sorted(set(zip(g.temperature, g.sample_index)))
        idx = {
            (r.model_id, r.arm, r.measure_id, r.temperature, r.sample_index): r
            for r in g.itertuples()
        }
        rows = []
        for (model, arm, measure), mg in grouped(g, ["model_id", "arm", "measure_id"]):
            cells = [
                fmt.row_header(model),
                fmt.row_header(arm),
                fmt.row_header(ctx.names.metric(measure)),
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
