"""The release gates page: the verdict of every rule of the gates file, failures first."""

from __future__ import annotations

from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Paragraph,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import Context, ci_cell, key_of

GATE_KEY = ["rule_id", "task", "model_id", "arm", "query_set", "run_id", "scope"]
_GATE_ORDER = {"fail": 0, "inconclusive": 1, "pass": 2}


def release_gates(ctx: Context) -> Section | None:
    """The release gates' verdicts on the latest run of each target, blocking ones first; the
    report opens with them when gate_results has rows (docs/gates.md)."""
    m = ctx.marts
    if not m.has("gate_results"):
        return None
    gates = m.frame("gate_results", "is_latest_run")
    if gates.empty:
        return None
    section = Section(
        "gates",
        "Release gates: may this release go?",
        "The verdict of every rule of the gates file on the latest run of each model and arm: "
        "pass, fail, or inconclusive when the evidence is too thin to decide.",
    )
    gates = gates.assign(
        _blocks=~gates.passed_for_gate.astype(bool),
        _order=gates.verdict.map(_GATE_ORDER).fillna(3),
    ).sort_values(
        ["_blocks", "_order", "severity", "rule_id", "scope"],
        ascending=[False, True, True, True, True],
    )
    n_block = int(gates._blocks.sum())
    section.blocks.append(
        Paragraph(
            (
                f"The release is blocked: {n_block} verdict{'s' if n_block != 1 else ''} of error rules "
                "fail or are inconclusive."
                if n_block
                else "No error rule blocks the release."
            )
            + " A gate never passes for lack of evidence: an inconclusive verdict blocks an error rule "
            "unless the rule allows it; a warn rule only reports. Observed and threshold are rates in %, "
            "a judge-score drop in points, or a change in points (no_regression)."
        )
    )
    rows = []
    for _, r in gates.iterrows():
        k = key_of(r, [c for c in GATE_KEY if c in gates.columns])
        src = lambda col, k=k: Source("gate_results", col, k)
        rows.append(
            [
                fmt.row_header(r.rule_id),
                fmt.label(f"{r.model_id}, {r.arm}"),
                fmt.label(r.scope),
                fmt.label(("BLOCKS: " if r._blocks else "") + str(r.verdict)),
                fmt.label(r.severity),
                fmt.fig(fmt.number(r.observed, 1), src("observed")),
                fmt.fig(fmt.number(r.threshold, 1), src("threshold")),
                ci_cell(r, "ci_low", "ci_high", "gate_results", k, 1),
                fmt.fig(fmt.count(r.n_pairs), src("n_pairs")),
                fmt.label(r.message),
            ]
        )
    section.blocks.append(
        Table(
            "Gate verdicts on the latest run of each target (gate_results), blocking ones first",
            [
                "Rule",
                "Model, arm",
                "Scope",
                "Verdict",
                "Severity",
                "Observed",
                "Threshold",
                "95 % interval",
                "Pairs",
                "Why",
            ],
            rows,
            row_headers=1,
        )
    )
    return section
