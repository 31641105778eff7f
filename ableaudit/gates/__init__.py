"""Release gates: rules over the marts (a gates file), their verdicts (mart `gate_results`),
and what CI reads (`evaluate`, JUnit XML). docs/gates.md describes the rules."""

from ableaudit.gates.report import GATE_COLUMNS, GateReport, GateResultsMissing, evaluate

__all__ = ["GATE_COLUMNS", "GateReport", "GateResultsMissing", "evaluate"]
