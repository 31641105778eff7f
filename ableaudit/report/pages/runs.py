"""The run-to-run page: per target with two runs or more, each measure's change from its
previous run to its latest, with the change's interval, test and flag (mart run_comparison)."""

from __future__ import annotations

import pandas as pd

from ableaudit.report import format as fmt
from ableaudit.report.records import Cell, Paragraph, Section, Source, Table
from ableaudit.report.tables import Context, ci_cell, grouped, key_of, ordered_arms

RUN_KEY = [
    "task",
    "model_id",
    "arm",
    "query_set",
    "compared_by",
    "baseline_cohort",
    "candidate_cohort",
    "metric",
    "slice",
    "slice_value",
]
_FLAG_WORDS = {
    "regressed": "regressed",
    "improved": "improved",
    "unchanged": "no change shown",
}
OTHER_MEASURES = {
    "refusal": "Refusal rate",
    "at_mismatch": "Assistive-technology mismatch",
}
"""Display names of the measures run_comparison adds to the metrics (rates of flags, not scores)."""


def latest_comparisons(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows comparing each target's latest run with the run before it: of the comparisons
    with the previous run, those whose candidate is no later comparison's baseline."""
    if runs.empty:
        return runs
    runs = runs[
        (runs.compared_by == "run")
        & runs.comparison.fillna("").str.split(",").map(lambda c: "previous" in c)
    ]
    target = ["task", "query_set", "model_id", "arm"]
    earlier = set(map(tuple, runs[[*target, "baseline_run_id"]].drop_duplicates().values.tolist()))
    latest = [tuple(r) not in earlier for r in runs[[*target, "candidate_run_id"]].values.tolist()]
    return runs[latest]


def run_to_run(ctx: Context) -> Section | None:
    """The section, when a target has two runs or more (run_comparison has a row comparing runs)."""
    m = ctx.marts
    runs = latest_comparisons(m.frame("run_comparison", "slice = 'overall'"))
    if runs.empty:
        return None
    names = ctx.names
    section = Section(
        "runs",
        "Run to run: did the latest run change?",
        "Per model and arm with two runs or more: each measure's rate in the previous run and in the "
        "latest, the change in points with its 95 % interval, the test of the change and its flag.",
    )
    section.blocks.append(
        Paragraph(
            "Rates are % of pairs flagged: degraded for a metric, labelled Yes for a judge dimension, "
            "refused, or naming an assistive technology that does not serve the disability. A positive "
            "change is worse. The comparison is paired on the pairs both runs hold when they are at least "
            "half of each run's pairs (McNemar's exact test), otherwise unpaired (Fisher's exact test); "
            "the interval resamples whole queries. 'Regressed' and 'improved' mean the interval lies wholly "
            "above or below 0; 'inconclusive', too few pairs or no interval (run_comparison, columns "
            "flag and reason)."
        )
    )
    for (task, query_set), g in grouped(runs, ["task", "query_set"]):
        rows = []
        g = g.assign(_arm=g.arm.map({a: i for i, a in enumerate(ordered_arms(g.arm))}))
        for r in g.sort_values(["model_id", "_arm", "metric"]).itertuples():
            k = key_of(r._asdict(), RUN_KEY)
            src = lambda col, k=k: Source("run_comparison", col, k)
            metric = OTHER_MEASURES.get(r.metric) or names.metric(r.metric)
            flag = _FLAG_WORDS.get(r.flag, r.flag)
            rows.append(
                [
                    fmt.row_header(f"{r.model_id}, {r.arm}"),
                    Cell(text=metric, header=True, title=None if metric == r.metric else r.metric),
                    fmt.label(f"{r.baseline_run_id} to {r.candidate_run_id}"),
                    fmt.fig(fmt.pct(r.baseline_rate), src("baseline_rate")),
                    fmt.fig(fmt.pct(r.candidate_rate), src("candidate_rate")),
                    fmt.shaded(
                        fmt.signed(r.change, 1),
                        r.change,
                        src("change"),
                        colour=fmt.change_colour(r.change),
                        note=flag,
                    ),
                    ci_cell(r._asdict(), "change_ci_low", "change_ci_high", "run_comparison", k, 1),
                    fmt.fig(fmt.pvalue(r.p_value), src("p_value")),
                    fmt.label(r.test),
                    fmt.fig(fmt.count(r.n_candidate_pairs), src("n_candidate_pairs")),
                ]
            )
        section.blocks.append(
            Table(
                f"Latest run against the previous one, per model, arm and measure ({task}, {query_set}; "
                "all pairs)",
                [
                    "Model, arm",
                    "Measure",
                    "Runs compared",
                    "Previous (%)",
                    "Latest (%)",
                    "Change (points)",
                    "95 % CI of the change",
                    "p",
                    "Test",
                    "Pairs (latest)",
                ],
                rows,
                row_headers=2,
                shaded=True,
                legend=fmt.CHANGE_LEGEND,
                scale="change",
            )
        )
    return section
