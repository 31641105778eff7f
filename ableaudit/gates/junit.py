"""Gate verdicts as JUnit XML, the test-report format CI systems read.

One <testsuite> per target and run (model_id / arm / run_id), one <testcase> per rule x
scope. A verdict that blocks the release, or any 'fail' (a warn rule's too, typed
'warning'), is a <failure> with the verdict's message; an inconclusive verdict that does
not block is <skipped>; a pass is an empty testcase. The evidence query is the
testcase's <system-out>.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _number(x: Any) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if v != v else f"{v:.4g}"


def _detail(row: dict[str, Any]) -> str:
    return (
        f"{row['message']}\n"
        f"verdict {row['verdict']} ({row['severity']} rule {row['rule_kind']}); observed "
        f"{_number(row['observed'])}, threshold {_number(row['threshold'])}, 95% interval "
        f"[{_number(row['ci_low'])}, {_number(row['ci_high'])}], {row['n_pairs']} pairs"
    )


def case_outcome(row: dict[str, Any]) -> str:
    """'failure', 'skipped' or 'pass': what the testcase of a verdict shows."""
    if row["verdict"] == "fail" or not row["passed_for_gate"]:
        return "failure"
    if row["verdict"] == "inconclusive":
        return "skipped"
    return "pass"


def junit_tree(rows: Iterable[dict[str, Any]], name: str = "ableaudit gates") -> ET.ElementTree:
    rows = list(rows)
    suites = ET.Element("testsuites", name=name)
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["model_id"], row["arm"], row["run_id"]), []).append(row)
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for (model_id, arm, run_id), group in groups.items():
        suite = ET.SubElement(suites, "testsuite", name=f"{model_id} / {arm} / run {run_id}")
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for row in group:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"ableaudit.gates.{model_id}.{arm}",
                name=f"{row['rule_id']} [{row['scope']}]",
                time="0",
            )
            outcome = case_outcome(row)
            counts["tests"] += 1
            if outcome == "failure":
                counts["failures"] += 1
                kind = "warning" if row["severity"] == "warn" else row["verdict"]
                failure = ET.SubElement(case, "failure", message=row["message"], type=kind)
                failure.text = _detail(row)
            elif outcome == "skipped":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=row["message"])
            if row.get("evidence_sql"):
                ET.SubElement(case, "system-out").text = row["evidence_sql"]
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("errors", "0")
    for key, value in totals.items():
        suites.set(key, str(value))
    suites.set("errors", "0")
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(rows: Iterable[dict[str, Any]], path: str | os.PathLike) -> Path:
    """Write the verdicts as JUnit XML to ``path`` (its folder is created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    junit_tree(rows).write(p, encoding="utf-8", xml_declaration=True)
    return p
