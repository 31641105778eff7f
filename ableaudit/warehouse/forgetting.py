"""The landings of a warehouse (``history``) and undoing one (``forget``).

Every write of the landing layer (``ableaudit.warehouse.landing``) belongs to a landing in
raw.landings and stamps its id on its rows; forgetting a landing removes those rows and
puts back the rows it superseded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ableaudit.warehouse import raw_schema
from ableaudit.warehouse.connection import connect
from ableaudit.warehouse.landing import _counts, writing
from ableaudit.warehouse.run_lease import LEASE_S, _run_alive


class LandingError(ValueError):
    """A landing cannot be found or forgotten; the message says why and what to do."""


LANDING_FIELDS = (
    "landing_id",
    "kind",
    "source",
    "source_sha256",
    "run_id",
    "started_at",
    "finished_at",
    "rows_json",
    "row_count",
    "status",
    "forgotten_at",
)


def _as_landing(row: Sequence[Any]) -> dict[str, Any]:
    out = dict(zip(LANDING_FIELDS, row, strict=True))
    out["rows"] = json.loads(out.pop("rows_json") or "{}")
    return out


def history(warehouse: str | Path | None) -> list[dict[str, Any]]:
    """Every landing, oldest first, with the rows it wrote per table (``rows``)."""
    con = connect(warehouse)
    try:
        rows = con.execute(
            f"select {', '.join(LANDING_FIELDS)} from raw.landings order by started_at, landing_id"
        ).fetchall()
    finally:
        con.close()
    return [_as_landing(r) for r in rows]


def _resolve(con: duckdb.DuckDBPyConnection, landing_id: str) -> dict[str, Any]:
    """The landing whose id is ``landing_id``, or the one whose id starts with it."""
    found = con.execute(
        f"select {', '.join(LANDING_FIELDS)} from raw.landings "
        "where landing_id = $id or starts_with(landing_id, $id) order by landing_id",
        {"id": landing_id},
    ).fetchall()
    exact = [r for r in found if r[0] == landing_id]
    if exact:
        return _as_landing(exact[0])
    if not found or not landing_id:
        raise LandingError(
            f"no landing {landing_id!r} in this warehouse; `ableaudit history` lists them"
        )
    if len(found) > 1:
        raise LandingError(
            f"{landing_id!r} starts {len(found)} landing ids ({', '.join(r[0] for r in found[:5])}); "
            "give more of the id"
        )
    return _as_landing(found[0])


@dataclass
class ForgetPlan:
    """What forgetting a landing would do."""

    landing: dict[str, Any]
    """Its raw.landings row (``rows``: what it wrote)."""
    rows: dict[str, int]
    """Its rows still in each raw table that are removed."""
    restored: int
    """Rows it superseded (``import responses --replace``) that come back in place of its own."""


def _forgettable(
    con: duckdb.DuckDBPyConnection, landing_id: str
) -> tuple[dict[str, int], pa.Table]:
    """A landing's rows that forgetting removes, per table, and the rows it puts back."""
    restore = _restorable(con, landing_id)
    rows = _counts(con, landing_id)
    rows.pop("superseded", None)
    if restore.num_rows:
        rows["generations"] -= restore.num_rows
    return {t: n for t, n in rows.items() if n}, restore


def _restorable(con: duckdb.DuckDBPyConnection, landing_id: str) -> pa.Table:
    """The rows this landing superseded whose replacement is still its own, newest first."""
    return con.sql(
        "select h.* from raw.generation_history h join raw.generations g "
        "on g.generation_id = h.generation_id and g.landing_id = $id "
        "where h.replaced_by_landing_id = $id "
        "qualify row_number() over (partition by h.generation_id order by h.created_at desc) = 1",
        params={"id": landing_id},
    ).to_arrow_table()


def _refuse_live_run(con: duckdb.DuckDBPyConnection, landing: dict[str, Any], lease_s: float):
    if landing["run_id"] is None:
        return
    found = con.execute(
        "select status, host, pid, date_diff('second', heartbeat_at, now()::timestamp) "
        "from raw.runs where run_id = ?",
        [landing["run_id"]],
    ).fetchall()
    run = found[0] if found else None
    if run and run[0] == "running" and _run_alive(run[1], run[2], run[3], lease_s):
        raise LandingError(
            f"landing {landing['landing_id']} is audit run {landing['run_id']}, still running "
            f"(process {run[2]} on {run[1]}); wait for it to end, or stop it, then forget it"
        )


def _refuse(con: duckdb.DuckDBPyConnection, landing: dict[str, Any], lease_s: float) -> None:
    if landing["status"] == "forgotten":
        raise LandingError(
            f"landing {landing['landing_id']} was already forgotten at "
            f"{landing['forgotten_at']:%Y-%m-%d %H:%M:%S}; `ableaudit history` lists the others"
        )
    _refuse_live_run(con, landing, lease_s)


def plan_forget(
    warehouse: str | Path | None, landing_id: str, lease_s: float = LEASE_S
) -> ForgetPlan:
    """What ``forget`` would remove and put back (nothing is written); refused as ``forget`` is."""
    con = connect(warehouse)
    try:
        landing = _resolve(con, landing_id)
        _refuse(con, landing, lease_s)
        rows, restore = _forgettable(con, landing["landing_id"])
    finally:
        con.close()
    return ForgetPlan(landing, rows, restore.num_rows)


def forget(warehouse: str | Path | None, landing_id: str, lease_s: float = LEASE_S) -> ForgetPlan:
    """Remove one landing's rows from raw.* in one transaction, and mark it 'forgotten'.

    A generation it superseded (``import responses --replace``) is put back as it was;
    a row it left as it was belongs to the landing that wrote it and stays. Refused for
    an audit run still running, and for a landing already forgotten.
    """
    with writing(warehouse) as con:
        landing = _resolve(con, landing_id)
        lid = landing["landing_id"]
        _refuse(con, landing, lease_s)
        rows, restore = _forgettable(con, lid)
        con.register("restore_rows", restore)
        # the rows it superseded come back; their history rows are no longer history
        con.execute(
            "update raw.generations as g set status = r.status, response_text = r.response_text, "
            "run_id = r.run_id, source = r.source, created_at = coalesce(r.landed_at, g.created_at), "
            "landing_id = r.landing_id from restore_rows r where g.generation_id = r.generation_id"
        )
        con.execute(
            "delete from raw.generation_history h using restore_rows r "
            "where h.generation_id = r.generation_id and h.replaced_by_landing_id = ?",
            [lid],
        )
        # its own rows that a later landing superseded: what it had superseded is now what
        # that later landing superseded
        con.execute(
            "update raw.generation_history as h set replaced_by_landing_id = x.replaced_by_landing_id, "
            "replaced_by_run_id = x.replaced_by_run_id from raw.generation_history x "
            "where x.landing_id = $id and h.replaced_by_landing_id = $id "
            "and h.generation_id = x.generation_id",
            {"id": lid},
        )
        for t in raw_schema.STAMPED:
            con.execute(f"delete from raw.{t.name} where landing_id = ?", [lid])
        con.execute(
            "update raw.landings set status = 'forgotten', forgotten_at = now() "
            "where landing_id = ?",
            [lid],
        )
    return ForgetPlan(landing, rows, restore.num_rows)
