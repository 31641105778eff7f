"""Reading the gate verdicts a build left in mart `gate_results`.

`evaluate` is what a scheduler or CI step calls after a build: it reads the verdicts
of one run (or of the latest run of every target) and says whether an error rule
failed. It reads the warehouse only; the verdicts are computed by dbt.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ableaudit.warehouse.connection import connect
from ableaudit.warehouse.connection import warehouse_path as resolve_warehouse

GATE_COLUMNS = (
    "rule_id",
    "rule_kind",
    "severity",
    "model_id",
    "arm",
    "run_id",
    "scope",
    "observed",
    "threshold",
    "ci_low",
    "ci_high",
    "n_pairs",
    "verdict",
    "passed_for_gate",
    "message",
    "evidence_sql",
)


@dataclass
class GateReport:
    """The gate verdicts of one run per target, as `gate_results` holds them."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    """The rows of gate_results for the run(s) read, one per rule x scope, ordered for reading."""
    failed_errors: list[dict[str, Any]] = field(default_factory=list)
    """Rows of error rules that block the release (passed_for_gate false)."""
    failed_warnings: list[dict[str, Any]] = field(default_factory=list)
    """Rows of warn rules whose verdict is 'fail' or 'inconclusive'."""
    inconclusive: list[dict[str, Any]] = field(default_factory=list)
    """Rows whose verdict is 'inconclusive' (too few pairs, a metric unavailable), any severity."""

    @property
    def ok(self) -> bool:
        """True when no error rule blocks the release."""
        return not self.failed_errors

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> GateReport:
        return cls(
            rows=rows,
            failed_errors=[
                r for r in rows if r["severity"] == "error" and not r["passed_for_gate"]
            ],
            failed_warnings=[r for r in rows if r["severity"] == "warn" and r["verdict"] != "pass"],
            inconclusive=[r for r in rows if r["verdict"] == "inconclusive"],
        )


class GateBlocked(RuntimeError):
    """An error rule of the release gates failed on the latest run of a target."""

    def __init__(self, report: GateReport):
        self.report = report
        lines = [r["message"] for r in report.failed_errors]
        super().__init__(
            f"{len(lines)} error rule verdict(s) block the release "
            f"(`ableaudit gate` prints them all, docs/gates.md): "
            + "; ".join(lines[:5])
            + ("; ..." if len(lines) > 5 else "")
        )


class GateResultsMissing(RuntimeError):
    """The warehouse has no gate_results (never built, or built without gates)."""


def _has_table(con: Any, name: str) -> bool:
    return bool(
        con.execute(
            "select count(*) from information_schema.tables where table_name = ?", [name]
        ).fetchone()[0]
    )


def evaluate(
    warehouse_path: str | os.PathLike | None = None, run_id: str | None = None
) -> GateReport:
    """The verdicts of run ``run_id``, else of the latest run of every target (model_id, arm).

    The latest run of a target is the one with the newest start among the runs that have
    a row in gate_results. Raises GateResultsMissing (a RuntimeError) when the warehouse
    has no gate_results, and ValueError when ``run_id`` has no verdicts.
    """
    wh = resolve_warehouse(warehouse_path)
    if not wh.exists():
        raise FileNotFoundError(f"no warehouse at {wh}: run an audit or `ableaudit build` first")
    con = connect(wh, read_only=True)
    try:
        if not _has_table(con, "gate_results"):
            raise GateResultsMissing(
                f"{wh} has no table gate_results: build the warehouse with a gates file "
                "(`ableaudit gate --gates FILE`, or `gates:` in the audit config)"
            )
        columns = ", ".join(f"g.{c}" for c in GATE_COLUMNS)
        order = "order by g.model_id, g.arm, g.run_id, g.severity, g.rule_id, g.scope"
        if run_id is not None:
            cur = con.execute(
                f"select {columns} from gate_results as g where g.run_id = ? {order}", [run_id]
            )
        else:
            cur = con.execute(
                f"""
                select {columns}
                from gate_results as g
                inner join (
                    select distinct model_id, arm, run_id, run_started_at from gate_results
                    qualify row_number() over (
                        partition by model_id, arm order by run_started_at desc nulls last, run_id desc
                    ) = 1
                ) as latest
                    on g.model_id = latest.model_id
                    and g.arm = latest.arm
                    and g.run_id = latest.run_id
                {order}
                """
            )
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, values, strict=True)) for values in cur.fetchall()]
    finally:
        con.close()
    if run_id is not None and not rows:
        raise ValueError(
            f"run {run_id!r} has no gate verdicts in {wh}: check the run id "
            "(select distinct run_id from gate_results)"
        )
    return GateReport.from_rows(rows)
