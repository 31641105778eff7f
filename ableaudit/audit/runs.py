"""raw.runs: one row per audit run, with the config that produced it; one audit per warehouse at a time."""

from __future__ import annotations

from pathlib import Path

from ableaudit.config import AuditConfig
from ableaudit.warehouse import landing


def start_run(warehouse: str | Path, run_id: str, cfg: AuditConfig) -> list[str]:
    """Take the warehouse for this run (``landing.RunConflict`` when another audit holds it);
    returns the runs found dead and marked 'interrupted'."""
    return landing.start_run(warehouse, run_id, cfg.model_dump_json())


def finish_run(warehouse: str | Path, run_id: str, status: str) -> None:
    landing.finish_run(warehouse, run_id, status)
