"""raw.runs: one row per audit run, with the config that produced it."""

from __future__ import annotations

from pathlib import Path

from ableaudit.config import AuditConfig
from ableaudit.warehouse import connect


def start_run(warehouse: str | Path, run_id: str, cfg: AuditConfig) -> None:
    con = connect(warehouse)
    try:
        con.execute(
            "insert into raw.runs (run_id, config_json, status) values (?, ?, 'running') "
            "on conflict (run_id) do update set status = 'running'",
            [run_id, cfg.model_dump_json()],
        )
    finally:
        con.close()


def finish_run(warehouse: str | Path, run_id: str, status: str) -> None:
    con = connect(warehouse)
    try:
        con.execute(
            "update raw.runs set status = ?, finished_at = current_timestamp where run_id = ?",
            [status, run_id],
        )
    finally:
        con.close()
