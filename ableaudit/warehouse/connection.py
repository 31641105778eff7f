"""Opening the warehouse file.

DuckDB lets one process write a file at a time; a connection here waits for a
busy file instead of failing, and the writer makes sure the raw layer exists
(declared in ``raw_schema``). The dbt-duckdb plugin applies the same DDL when
dbt connects, so a plain ``dbt build`` on a fresh file works.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import duckdb

from ableaudit.warehouse import raw_schema

DEFAULT_WAREHOUSE = "warehouse/ableaudit.duckdb"

# Threads of one process (targets generating in parallel) share one DuckDB database;
# their writes to raw.* take turns, so two landings or two DDL runs never conflict.
WRITE_LOCK = threading.RLock()



def warehouse_path(path: str | os.PathLike | None = None) -> Path:
    """Resolve the warehouse file: explicit path, then ABLEAUDIT_WAREHOUSE, then the default."""
    chosen = path or os.environ.get("ABLEAUDIT_WAREHOUSE") or DEFAULT_WAREHOUSE
    return Path(chosen).expanduser().resolve()


def ensure_raw_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the raw tables if they are missing (idempotent)."""
    con.execute(raw_schema.ddl())


def connect(
    path: str | os.PathLike | None = None, read_only: bool = False, wait_s: float = 120.0
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; the writer also makes sure the raw layer exists.

    DuckDB lets one process hold the file. Another process holding it (a dbt run,
    a BI tool reading the live file by mistake) makes us wait and retry, up to
    `wait_s`, rather than fail an audit midway; then the error says who to stop.
    """
    p = warehouse_path(path)
    if not read_only:
        p.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    delay = 0.1
    while True:
        try:
            con = duckdb.connect(str(p), read_only=read_only)
            break
        except duckdb.IOException as err:
            if "lock" not in str(err).lower() or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the warehouse {p} is held by another process ({err}). Close other DuckDB "
                    "clients of this file (BI tools must read the published copy, see docs/bi.md)"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    if not read_only:
        with WRITE_LOCK:
            ensure_raw_schema(con)
    return con
