"""Release gates: rules over the marts (a gates file), their verdicts (mart `gate_results`),
and what CI reads (`evaluate`, JUnit XML). docs/gates.md describes the rules."""

from ableaudit.gates.report import (
    GATE_COLUMNS,
    GateBlocked,
    GateReport,
    GateResultsMissing,
    evaluate,
)
from ableaudit.gates.rules import GateFileError, GateRule, load_gates

__all__ = [
    "GATE_COLUMNS",
    "GateBlocked",
    "GateFileError",
    "GateReport",
    "GateResultsMissing",
    "GateRule",
    "evaluate",
    "load_gates",
]
