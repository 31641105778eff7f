"""Opening the warehouse file.

DuckDB lets one process write a file at a time; a connection here waits for a
busy file instead of failing, and the writer makes sure the raw layer exists
(declared in ``raw_schema``). The dbt-duckdb plugin applies the same DDL when
dbt connects, so a plain ``dbt build`` on a fresh file works.
"""

from __future__ import annotations

import errno
import os
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import duckdb

from ableaudit.errors import AbleauditError
from ableaudit.warehouse import raw_schema

DEFAULT_WAREHOUSE = "warehouse/ableaudit.duckdb"

# Threads of one process (targets generating in parallel) share one DuckDB database;
# their writes to raw.* take turns, so two landings or two DDL runs never conflict.
WRITE_LOCK = threading.RLock()


def warehouse_path(path: str | os.PathLike | None = None) -> Path:
    """Resolve the warehouse file: explicit path, then ABLEAUDIT_WAREHOUSE, then the default.
    A path DuckDB cannot keep a database at is refused (``refuse_query_mark``)."""
    chosen = path or os.environ.get("ABLEAUDIT_WAREHOUSE") or DEFAULT_WAREHOUSE
    resolved = Path(chosen).expanduser().resolve()
    refuse_query_mark(resolved)
    return resolved


def refuse_query_mark(p: Path) -> None:
    """DuckDB reads a ``?`` in a database's path as the start of options (``file.db?opt=x``): it
    puts the write-ahead log and the spill folder before the ``?``, so a ``?`` in a folder's name
    sends them into a folder that does not exist, and one in the file's name beside it under
    another name. Any other character works (quotes, semicolons, ``#``, spaces, accents)."""
    text = str(p)
    at = text.find("?")
    if at < 0:
        return
    suggested = text.replace("?", "_")
    raise WarehouseError(
        f"the warehouse path {text} holds a '?', which DuckDB reads as the start of a database's "
        f"options (it would keep the write-ahead log at {text[:at]}.wal{text[at:]}); give "
        f"--warehouse (or $ABLEAUDIT_WAREHOUSE) a path without '?', e.g. {suggested}"
    )


class WarehouseNotFound(AbleauditError, FileNotFoundError):
    """A command that reads a warehouse was given a path where there is none."""


def nearest_warehouse(path: Path) -> str:
    """``"; did you mean '...'?"`` naming the file (or folder) beside ``path`` closest to it,
    or ``""`` when none is close."""
    from ableaudit.errors import close_matches

    folder = path
    while not folder.parent.is_dir() and folder.parent != folder:
        folder = folder.parent  # the deepest missing folder: a typo there hides the file
    try:
        names = [p.name for p in folder.parent.iterdir()]
    except OSError:
        return ""
    hits = close_matches(folder.name, names, n=1)
    if not hits:
        return ""
    return f"; did you mean {str(folder.parent / hits[0] / path.relative_to(folder))!r}?"


def existing_warehouse(path: str | os.PathLike | None = None) -> Path:
    """``warehouse_path(path)`` when that file exists; else WarehouseNotFound with the closest
    name beside it, before anything reads or creates a file. For the commands that read a
    warehouse (every command but an audit and an import, which create one)."""
    wh = warehouse_path(path)
    if wh.is_file():
        return wh
    why = "is a folder, not a warehouse file" if wh.is_dir() else "does not exist"
    raise WarehouseNotFound(
        f"no warehouse at {wh}: it {why}{nearest_warehouse(wh)}; pass --warehouse (or set "
        "ABLEAUDIT_WAREHOUSE) naming the file an audit or an import created"
    )


def ensure_raw_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the raw tables if they are missing, add columns a newer version declares
    to an older warehouse's tables, and rebuild without it a table whose primary key a newer
    version dropped (``raw_schema.unindexing``); idempotent. Rows older than landing ids get
    'legacy-...' landings (``raw_schema.legacy_landings``)."""
    con.execute(raw_schema.ddl())
    existing = set(
        con.execute(
            "select table_name, column_name from information_schema.columns where table_schema = 'raw'"
        ).fetchall()
    )
    indexed = {
        t
        for (t,) in con.execute(
            "select table_name from duckdb_tables() "
            "where database_name = current_database() and schema_name = 'raw' and has_primary_key"
        ).fetchall()
    }
    statements = raw_schema.migrations(existing) + raw_schema.unindexing(indexed)
    if not statements:
        return
    # one transaction: a warehouse never keeps a new column without its backfill
    con.execute("begin transaction")
    try:
        for statement in statements:
            con.execute(statement)
    except BaseException:
        con.execute("rollback")
        raise
    con.execute("commit")


def lock_holder(err: BaseException) -> str:
    """Which process holds the file, from DuckDB's lock error ('... (PID 123)'), with its command line."""
    match = re.search(r"PID (\d+)", str(err))
    if not match:
        return "another process"
    pid = int(match.group(1))
    try:
        cmd = (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode(errors="replace")
            .strip()
        )
    except OSError:
        cmd = ""
    return f"process {pid}" + (f" ({cmd[:200]})" if cmd else "")


class WarehouseError(AbleauditError):
    """The warehouse file cannot be opened for a reason its message names, with the fix."""


class WarehouseBusy(WarehouseError, RuntimeError):
    """Another process held the warehouse for as long as we waited; the message names it."""


def is_lock_error(err: BaseException) -> bool:
    """DuckDB's error for a file another process holds ('Could not set lock on file ...')."""
    return "could not set lock" in str(err).lower() or "conflicting lock" in str(err).lower()


def held(p: Path, err: BaseException, wait_s: float) -> str:
    return (
        f"the warehouse {p} is held by {lock_holder(err)} (waited {wait_s:.0f} s). Stop it, or if it "
        "is a BI tool or SQL client, point it at the published copy instead (see docs/bi.md)"
    )


def _unwritable(p: Path, reason: str) -> str:
    return (
        f"cannot write the warehouse {p} ({reason}): its folder {p.parent} is read-only for this "
        "user. Give --warehouse (or $ABLEAUDIT_WAREHOUSE) a file in a folder you can write, or "
        "make the folder writable"
    )


def refuse_non_duckdb(p: Path) -> None:
    """A folder, or a file that is not a DuckDB database (a CSV, say), named as the warehouse."""
    if p.is_dir():
        raise WarehouseError(
            f"the warehouse {p} is a folder; --warehouse (or $ABLEAUDIT_WAREHOUSE) names the "
            f"DuckDB file, e.g. {p / 'ableaudit.duckdb'}"
        )
    try:
        with p.open("rb") as f:
            head = f.read(12)
    except FileNotFoundError:
        return
    except OSError as err:
        raise WarehouseError(f"cannot read the warehouse {p}: {err.strerror or err}") from None
    if head and head[8:12] != b"DUCK":
        raise WarehouseError(
            f"the warehouse {p} is not a DuckDB database (its first bytes are "
            f"{head[:8]!r}: a CSV or another kind of file?); give --warehouse the .duckdb file, "
            "or a path where none exists yet to start a new warehouse"
        )


def open_failure(p: Path, err: BaseException) -> str:
    """What DuckDB's error on opening ``p`` means, and the fix."""
    text = str(err)
    if "Permission denied" in text or "Read-only file system" in text:
        return _unwritable(
            p, "permission denied" if "Permission" in text else "read-only file system"
        )
    if "WAL" in text:
        return (
            f"the warehouse {p} cannot be opened: its write-ahead log {p}.wal does not match it "
            "(a file restored or copied without its .wal, beside a .wal of the file before). "
            f"Move {p.name}.wal aside and run the command again; the .wal holds only what the "
            "replaced file had not yet written in"
        )
    if "Could not read enough bytes" in text or "not a valid DuckDB database" in text:
        return (
            f"the warehouse {p} is damaged: it is shorter than DuckDB wrote it (a copy cut "
            "short, or a full disk). Restore it from a backup, or move it aside and build it "
            "again from your audits and imports"
        )
    return f"cannot open the warehouse {p}: {text}"


def io_failure(err: BaseException) -> str | None:
    """A command's failure to write a file (a read-only folder, a full disk) as one message
    with the fix; None for any other error."""
    if isinstance(err, duckdb.IOException):
        found = re.search(
            r'"([^"]+)": (Permission denied|Read-only file system|No space)', str(err)
        )
        if found is None:
            return None
        where, reason = found.groups()
    elif isinstance(err, OSError) and err.errno in _UNWRITABLE:
        where, reason = err.filename, err.strerror
    else:
        return None
    if reason.startswith("No space"):
        return f"cannot write {where}: the disk is full; free some space and run the command again"
    return (
        f"cannot write {where} ({reason.lower()}): the folder is read-only for this user. Give "
        "--warehouse (or $ABLEAUDIT_WAREHOUSE, or --out) a place you can write, or make it writable"
    )


_UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC}


def wait_until_free(path: str | os.PathLike | None = None, wait_s: float = 120.0) -> None:
    """Wait (up to ``wait_s``) until this process can open the warehouse for writing, as ``connect`` does:
    dbt, which opens the file itself, waits here first."""
    connect(path, wait_s=wait_s).close()


MEMORY_LIMIT_ENV = "ABLEAUDIT_DUCKDB_MEMORY_LIMIT"
"""DuckDB's ``memory_limit`` for a build's connections (dbt's, publish's): a size such as
``4GB`` or ``500MB``; ``none`` leaves DuckDB's own default (80% of the machine's memory)."""

DEFAULT_MEMORY_LIMIT = "2500MB"
"""The limit when $ABLEAUDIT_DUCKDB_MEMORY_LIMIT is unset, on a machine where DuckDB's own
default (80% of memory) is higher. DuckDB's buffer pool otherwise grows
to what the machine has (a build of a million generations held ~10 GB); under a limit, joins
and sorts that do not fit spill to a temporary folder (docs/running.md#memory). The build's
Python (dbt, the Python models) takes 0.6-1.1 GB beside it: at 2500MB a full build of a
million generations peaks under 4 GB in all."""
_DEFAULT_BYTES = 2500 * 1000**2


def memory_limit(environ: Mapping[str, str] | None = None) -> str | None:
    """The memory limit a build's DuckDB connections get; None: DuckDB's own default."""
    value = (os.environ if environ is None else environ).get(MEMORY_LIMIT_ENV, "").strip()
    if not value:
        # the default only ever lowers DuckDB's own (80% of memory): a small machine keeps that
        import psutil

        small = 0.8 * psutil.virtual_memory().total < _DEFAULT_BYTES
        return None if small else DEFAULT_MEMORY_LIMIT
    return None if value.lower() == "none" else value


def apply_memory_limit(con: duckdb.DuckDBPyConnection) -> None:
    """Set ``memory_limit()`` on ``con``; a value DuckDB refuses is named with the fix."""
    limit = memory_limit()
    if limit is None:
        return
    try:
        if "'" in limit:
            raise duckdb.InvalidInputException("a size holds no quote")
        con.execute(f"set memory_limit = '{limit}'")
    except duckdb.Error as err:
        raise ValueError(
            f"${MEMORY_LIMIT_ENV}={limit!r} is not a memory size DuckDB reads ({err}); "
            "set it to a size such as 4GB or 500MB, or to none for DuckDB's own default"
        ) from None


def connect(
    path: str | os.PathLike | None = None, read_only: bool = False, wait_s: float = 120.0
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; the writer also makes sure the raw layer exists.

    DuckDB lets one process hold the file. Another process holding it (a dbt run,
    a BI tool reading the live file by mistake) makes us wait and retry, up to
    `wait_s`, rather than fail an audit midway; then the error says who to stop.
    """
    p = warehouse_path(path)
    refuse_non_duckdb(p)
    if not read_only:
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise WarehouseError(_unwritable(p, err.strerror or str(err))) from None
    deadline = time.monotonic() + wait_s
    delay = 0.1
    while True:
        try:
            con = duckdb.connect(str(p), read_only=read_only)
            break
        except duckdb.IOException as err:
            if not is_lock_error(err):
                raise WarehouseError(open_failure(p, err)) from None
            if time.monotonic() > deadline:
                raise WarehouseBusy(held(p, err, wait_s)) from None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    # DuckDB draws a progress bar for a query over 2 s: noise in a command's output and logs
    con.execute("set enable_progress_bar = false")
    if not read_only:
        with WRITE_LOCK:
            ensure_raw_schema(con)
    return con
