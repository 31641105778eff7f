"""`ableaudit gate`: compute the gate verdicts of a gates file in the warehouse, print
them, write JUnit XML, and say by the exit status whether the release may go."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from ableaudit.gates.junit import case_outcome, write_junit
from ableaudit.gates.report import GateReport, evaluate
from ableaudit.gates.rules import load_gates

# The models a gates file changes, and what they read that a build of the warehouse made.
GATE_MODELS = "int_run_pairs+"


def build_vars(gates_file: str | os.PathLike, extra: str | None = None) -> str:
    """dbt --vars with var gates_file set (over the YAML mapping ``extra``, if any)."""
    values = yaml.safe_load(extra) if extra else {}
    if not isinstance(values, dict):
        raise ValueError(
            f"--vars must be a YAML mapping, e.g. '{{degradation_threshold: 0.1}}', not {extra!r}"
        )
    values["gates_file"] = str(Path(gates_file).resolve())
    return json.dumps(values)


def compute_verdicts(
    warehouse: str | os.PathLike, gates_file: str | os.PathLike, extra_vars: str | None = None
) -> None:
    """Check the gates file, then rebuild the per-run models and gate_results with it (dbt run:
    the verdicts are read, not enforced, here)."""
    from ableaudit.dbt.selected import build_selected

    load_gates(gates_file)
    build_selected(warehouse, [GATE_MODELS], build_vars(gates_file, extra_vars), command="run")


def _cell(x: object, width: int) -> str:
    text = "" if x is None else str(x)
    return text if len(text) <= width else text[: width - 1] + "…"


def _value(x: object) -> str:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-"
    return "-" if v != v else f"{v:.1f}"


def format_table(report: GateReport) -> str:
    """The verdicts, blocking ones first, as a plain-text table."""
    order = {"failure": 0, "skipped": 1, "pass": 2}
    rows = sorted(report.rows, key=lambda r: (order[case_outcome(r)], r["severity"], r["rule_id"]))
    head = f"{'verdict':<13} {'sev':<5} {'rule':<24} {'run':<14} {'scope':<48} {'obs':>7} {'limit':>7} {'n':>5}"
    lines = [head, "-" * len(head)]
    for r in rows:
        verdict = r["verdict"] + ("" if r["passed_for_gate"] else " !")
        lines.append(
            f"{verdict:<13} {r['severity']:<5} {_cell(r['rule_id'], 24):<24} "
            f"{_cell(r['run_id'], 14):<14} {_cell(r['scope'], 48):<48} "
            f"{_value(r['observed']):>7} {_value(r['threshold']):>7} {r['n_pairs']:>5}"
        )
    blocking = report.failed_errors
    lines.append("")
    lines.append(
        f"{len(report.rows)} verdicts: {len(blocking)} blocking (error rules), "
        f"{len(report.failed_warnings)} warnings, {len(report.inconclusive)} inconclusive."
    )
    for r in blocking:
        lines.append(f"  BLOCKS: {r['message']}")
    lines.append("Release gate: " + ("PASSED" if report.ok else "FAILED"))
    return "\n".join(lines)


def gate_command(
    warehouse: str | os.PathLike,
    gates_file: str | os.PathLike | None = None,
    run_id: str | None = None,
    junit: str | os.PathLike | None = None,
    extra_vars: str | None = None,
) -> GateReport:
    """Compute (with a gates file) or read (without: the verdicts the last build left) the
    verdicts of ``run_id`` (default: the latest run of each target); print and write them."""
    if gates_file is not None:
        compute_verdicts(warehouse, gates_file, extra_vars)
    report = evaluate(warehouse, run_id)
    if not report.rows:
        raise ValueError(
            "gate_results has no verdict: pass a gates file (--gates FILE, see docs/gates.md) "
            "and make sure the warehouse holds a run"
        )
    print(format_table(report))
    if junit is not None:
        print(f"JUnit XML: {write_junit(report.rows, junit)}")
    return report
