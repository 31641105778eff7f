"""Which audit run holds the warehouse: ``start_run`` takes it, ``finish_run`` gives it back.

One audit runs on a warehouse at a time. A run is one landing (kind 'audit') of the
landing layer (``ableaudit.warehouse.landing``), and its row in raw.runs is its lease.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from pathlib import Path

import duckdb

from ableaudit.redaction import redact
from ableaudit.warehouse.landing import _finish, new_landing_id, writing


class RunConflict(RuntimeError):
    """Another audit is running on this warehouse; the message names it."""


LEASE_S = 30 * 60.0
"""How long a run on another host holds the warehouse after it last landed something; on this
host a run holds it while its process lives."""


def _run_alive(
    host: str | None, pid: int | None, heartbeat_age_s: float | None, lease_s: float
) -> bool:
    if host == socket.gethostname() and pid is not None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return heartbeat_age_s is not None and heartbeat_age_s < lease_s


def start_run(
    warehouse: str | Path, run_id: str, config_json: str, lease_s: float = LEASE_S
) -> list[str]:
    """Take the warehouse for a run: its row, 'running' until ``finish_run``.

    One audit runs on a warehouse at a time: a live run (its process alive on this
    host, or a recent landing from another host) refuses the new one with a
    message naming it; a run whose process is gone is marked 'interrupted'.
    Returns the ids of the runs so marked. The run is one landing (kind 'audit'): every
    generation and verdict landed under its run id carries that landing's id.
    """
    with writing(warehouse) as con:
        others = con.execute(
            "select run_id, host, pid, started_at, date_diff('second', heartbeat_at, now()::timestamp) "
            "from raw.runs where status = 'running' and run_id <> ?",
            [run_id],
        ).fetchall()
        dead = []
        for other, host, pid, started, age in others:
            if _run_alive(host, pid, age, lease_s):
                raise RunConflict(
                    f"run {other} (started {started:%Y-%m-%d %H:%M:%S}, process {pid} on {host}) is still auditing "
                    f"this warehouse; wait for it to finish, or stop that process. A run whose process died is "
                    "released automatically."
                )
            dead.append(other)
        if dead:
            con.execute(
                "update raw.runs set status = 'interrupted', finished_at = coalesce(heartbeat_at, started_at) "
                "where run_id in (select unnest(?::varchar[]))",
                [dead],
            )
            for landing_id in _audit_landings(con, dead):
                _finish(con, landing_id, "interrupted")
        found = _audit_landings(con, [run_id])
        landing_id = found[0] if found else new_landing_id()
        if not found:
            con.execute(
                "insert into raw.landings (landing_id, kind, source, run_id, status) "
                "values (?, 'audit', ?, ?, 'running')",
                [landing_id, redact(_audit_source(run_id, config_json)), run_id],
            )
        else:
            con.execute(
                "update raw.landings set status = 'running', finished_at = null "
                "where landing_id = ?",
                [landing_id],
            )
        con.execute(
            "insert into raw.runs (run_id, config_json, status, host, pid, heartbeat_at, landing_id) "
            "values (?, ?, 'running', ?, ?, now(), ?) on conflict (run_id) do update set status = 'running', "
            "host = excluded.host, pid = excluded.pid, heartbeat_at = excluded.heartbeat_at",
            [run_id, redact(config_json), socket.gethostname(), os.getpid(), landing_id],
        )
    return dead


def _audit_landings(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> list[str]:
    return [
        landing_id
        for (landing_id,) in con.execute(
            "select landing_id from raw.landings where kind = 'audit' "
            "and run_id in (select unnest(?::varchar[]))",
            [list(run_ids)],
        ).fetchall()
    ]


def _audit_source(run_id: str, config_json: str) -> str:
    try:
        name = json.loads(config_json).get("name")
    except (ValueError, AttributeError):
        name = None
    return f"audit {name} (run {run_id})" if name else f"audit run {run_id}"


LANDING_STATUS = {"completed": "landed"}
"""A run's status as its landing's: a completed run has landed; 'failed' and 'interrupted'
keep their word (what they landed stays, and can be forgotten)."""


def finish_run(warehouse: str | Path, run_id: str, status: str) -> None:
    with writing(warehouse) as con:
        con.execute(
            "update raw.runs set status = ?, finished_at = current_timestamp where run_id = ?",
            [status, run_id],
        )
        for landing_id in _audit_landings(con, [run_id]):
            _finish(con, landing_id, LANDING_STATUS.get(status, status))
