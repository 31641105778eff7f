"""The landing layer: the only code that writes ``raw.*``.

Every write takes the process-wide write lock (threads of one audit take turns)
and runs in one transaction, so a failure lands nothing of its batch.

Generations and verdicts are append-only and idempotent: a row is keyed by a
content hash; a landed result is never replaced, a landed error is replaced by
a later attempt (every failed generation attempt is also kept in
raw.generation_errors), so errors are retried but never cached as results. The
one exception is an import the user asked to replace (``import responses
--replace``): the landed row is copied into raw.generation_history first.
Reference data (query sets, image sets, annotations, adapters, runs) is
validated by its ingest module first and written here.

Every write belongs to a landing (raw.landings) and stamps its ``landing_id`` on
the rows it writes: an audit run's landing (found by the rows' run id), the one a
caller opened with ``recording`` (an import: its kind, file and file digest), or
else a landing of its own. A row left as it was keeps the landing that wrote it.
``forget`` removes one landing's rows, putting back the rows it superseded.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ableaudit.records import GenerationResult, LandingReport, PlannedGeneration
from ableaudit.redaction import redact, redactor
from ableaudit.scorers.parallel import available_cores
from ableaudit.warehouse import raw_schema
from ableaudit.warehouse.connection import WRITE_LOCK, connect

GENERATION_COLUMNS: dict[str, pa.DataType] = raw_schema.table("generations").arrow_columns()
JUDGMENT_COLUMNS: dict[str, pa.DataType] = raw_schema.table("judgments").arrow_columns()


def result_row(
    plan: PlannedGeneration, result: GenerationResult, run_id: str | None, source: str = "generated"
) -> dict[str, Any]:
    if result.key != plan.generation_id:
        raise ValueError(
            f"result for {result.key} does not belong to planned generation {plan.generation_id}"
        )
    row = plan.as_row()
    row.update(
        run_id=run_id,
        status=result.status,
        finish_reason=result.finish_reason,
        response_text=result.text if result.status != "error" else None,
        error_message=result.error,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        latency_ms=result.latency_ms,
        source=source,
    )
    if result.model_revision:
        row["model_revision"] = result.model_revision
    return row


def to_arrow(rows: Sequence[dict[str, Any]]) -> pa.Table:
    return _arrow(rows, GENERATION_COLUMNS)


def _arrow(
    rows: Sequence[dict[str, Any]],
    columns: dict[str, pa.DataType],
    landing_id: str | None = None,
) -> pa.Table:
    """Rows as Arrow in the declared schema; ``landing_id`` stamps every row; the texts a
    server or a judge wrote (``REDACTED_COLUMNS``) pass ``redaction``."""
    schema = pa.schema(list(columns.items()))
    stamp = {"landing_id": landing_id} if landing_id is not None else {}
    redact = redactor()
    return pa.Table.from_pylist(
        [
            {c: redact(r.get(c)) if c in REDACTED_COLUMNS else r.get(c) for c in columns} | stamp
            for r in rows
        ],
        schema=schema,
    )


REDACTED_COLUMNS = frozenset({"error_message", "raw_output", "config_json", "source"})
"""The raw columns whose text may echo a key (a server's error, a judge's text, a run's config,
a landing's source): redacted as they land (``ableaudit.redaction``)."""


# --------------------------------------------------------------------------- landings


@dataclass
class Recording:
    """A landing a caller opened with ``recording``: every write inside the block stamps its id."""

    landing_id: str
    """The id its rows carry."""
    kind: str
    """'import-responses', 'judge', ... (raw.landings.kind)."""
    source: str | None
    """The file, folder or run it came from."""
    source_sha256: str | None
    """Of the file's bytes, when the source is a file."""
    run_id: str | None
    """The run its rows name, if any."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows it wrote per raw table, once it has ended (empty when it wrote nothing)."""
    wrote: bool = False
    """Whether a write of the block reached the warehouse (its raw.landings row exists)."""


_CURRENT: ContextVar[Recording | None] = ContextVar("ableaudit_landing", default=None)


def new_landing_id() -> str:
    return uuid.uuid4().hex[:12]


@contextmanager
def recording(
    warehouse: str | Path | None,
    kind: str,
    source: str | Path | None = None,
    file: str | Path | None = None,
    run_id: str | None = None,
) -> Iterator[Recording]:
    """Make every write of the block one landing of ``kind`` from ``source`` (``file``: a file
    whose digest is kept). Its raw.landings row appears with the first write, so a refused
    import leaves no landing; it ends 'landed', or 'failed' when the block raises."""
    from ableaudit.media import file_sha256

    digest = file_sha256(file) if file is not None and Path(file).is_file() else None
    current = Recording(new_landing_id(), kind, _text(source), digest, run_id)
    token = _CURRENT.set(current)
    status = "failed"
    try:
        yield current
        status = "landed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        _CURRENT.reset(token)
        if current.wrote:
            with writing(warehouse) as con:
                current.rows = _finish(con, current.landing_id, status, only_running=True)
                if status == "landed" and not current.rows:
                    # every row had landed already: no landing, and the raw layer as it was
                    con.execute(
                        "delete from raw.landings where landing_id = ?", [current.landing_id]
                    )


def _text(value: str | Path | None) -> str | None:
    if value is None:
        return None
    return str(Path(value).expanduser().resolve()) if isinstance(value, Path) else str(value)


def _landing_for(
    con: duckdb.DuckDBPyConnection, kind: str, source: str | None, run_id: str | None = None
) -> tuple[str, bool]:
    """The landing a write belongs to, and whether the write is a landing of its own (it
    settles it in its transaction): the caller's ``recording``, else the audit run named by
    ``run_id``, else a new one."""
    current = _CURRENT.get()
    if current is not None:
        con.execute(
            "insert into raw.landings (landing_id, kind, source, source_sha256, run_id, status) "
            "values (?, ?, ?, ?, ?, 'running') on conflict (landing_id) do nothing",
            [
                current.landing_id,
                current.kind,
                current.source,
                current.source_sha256,
                current.run_id or run_id,
            ],
        )
        current.wrote = True
        return current.landing_id, False
    if run_id is not None:
        found = con.execute(
            "select landing_id from raw.landings where run_id = ? and kind = 'audit'", [run_id]
        ).fetchall()  # fetchall: DuckDB 2 refuses new work while a result is half read
        if found:
            return found[0][0], False
    landing_id = new_landing_id()
    con.execute(
        "insert into raw.landings (landing_id, kind, source, run_id, status) "
        "values (?, ?, ?, ?, 'running')",
        [landing_id, kind, source if source is not None else _run_source(run_id), run_id],
    )
    return landing_id, True


def _run_source(run_id: str | None) -> str | None:
    return f"run {run_id}" if run_id else None


def _one_run(rows: Sequence[dict[str, Any]]) -> str | None:
    runs = {r.get("run_id") for r in rows}
    return runs.pop() if len(runs) == 1 else None


def _counts(con: duckdb.DuckDBPyConnection, landing_id: str) -> dict[str, int]:
    """Rows a landing has in each raw table; 'superseded': landed rows it replaced."""
    parts = [
        f"select '{t.name}', count(*) from raw.{t.name} where landing_id = $id"
        for t in raw_schema.STAMPED
        if t.name != "generation_history"
    ]
    parts.append(
        "select 'superseded', count(*) from raw.generation_history "
        "where replaced_by_landing_id = $id"
    )
    rows = con.execute(" union all ".join(parts), {"id": landing_id}).fetchall()
    return {name: int(n) for name, n in rows if n}


def _finish(
    con: duckdb.DuckDBPyConnection, landing_id: str, status: str, only_running: bool = False
) -> dict[str, int]:
    """End a landing: its status, when, and what it wrote."""
    counts = _counts(con, landing_id)
    total = sum(n for name, n in counts.items() if name != "superseded")
    con.execute(
        "update raw.landings set status = ?, finished_at = now(), rows_json = ?, row_count = ? "
        "where landing_id = ?" + (" and status = 'running'" if only_running else ""),
        [status, json.dumps(counts, sort_keys=True), total, landing_id],
    )
    return counts


def _settle(con: duckdb.DuckDBPyConnection, landing_id: str, own: bool) -> None:
    if own:
        _finish(con, landing_id, "landed")


@contextmanager
def writing(warehouse: str | Path | None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection inside one transaction, holding the write lock: committed when the
    block ends, rolled back (nothing written) when it raises."""
    with WRITE_LOCK:
        con = connect(warehouse)
        try:
            con.execute("begin transaction")
            try:
                yield con
            except BaseException:
                con.execute("rollback")
                raise
            con.execute("commit")
        finally:
            con.close()


def landed_keys(warehouse: str | Path, keys: Iterable[str]) -> set[str]:
    """Keys already landed as a result (ok or empty); errors are not 'done'."""
    keys = list(keys)
    if not keys:
        return set()
    con = connect(warehouse)
    try:
        wanted = pa.table({"generation_id": pa.array(keys, pa.string())})
        con.register("wanted_keys", wanted)
        found = con.execute(
            "select g.generation_id from raw.generations g join wanted_keys w using (generation_id) "
            "where g.status in ('ok', 'empty')"
        ).fetchall()
        return {k for (k,) in found}
    finally:
        con.close()


def land_keyed(
    warehouse: str | Path,
    table: str,
    key: str,
    status_column: str,
    columns: dict[str, pa.DataType],
    rows: Sequence[dict[str, Any]],
    also: Sequence[str] = (),
    kind: str | None = None,
) -> LandingReport:
    """Land rows into ``raw.<table>`` in one transaction, keyed by ``key``.

    The rule shared by every raw table a run writes: a landed row is final unless
    its ``status_column`` says 'error', in which case a later attempt replaces it.
    Within one batch the first non-error row of a key wins. ``also`` holds extra
    statements run in the same transaction over the batch, registered as
    ``incoming``. The rows carry their landing's id (``kind``: the kind of a landing of
    their own, when no recording or audit run holds them).
    """
    report = LandingReport(errors=sum(1 for r in rows if r.get(status_column) == "error"))
    if not rows:
        return report
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        prior = seen.get(r[key])
        if prior is None or (
            prior.get(status_column) == "error" and r.get(status_column) != "error"
        ):
            seen[r[key]] = r
    unique = list(seen.values())
    cols = ", ".join(columns)
    updates = ", ".join(f"{c} = i.{c}" for c in columns if c != key)
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, kind or table, None, _one_run(unique))
        con.register("incoming", _arrow(unique, columns, landing_id))
        before = dict(
            con.execute(
                f"select t.{key}, t.{status_column} from raw.{table} t join incoming i using ({key})"
            ).fetchall()
        )
        # by the key, not by a primary key's conflict: raw.generations has none
        # (raw_schema.UNINDEXED_KEYS); a landed error is replaced, anything else kept
        con.execute(
            f"update raw.{table} as t set {updates}, created_at = now() from incoming i "
            f"where t.{key} = i.{key} and t.{status_column} = 'error'"
        )
        con.execute(
            f"insert into raw.{table} ({cols}) select {cols} from incoming i "
            f"where not exists (select 1 from raw.{table} t where t.{key} = i.{key})"
        )
        for statement in also:
            con.execute(statement)
        _settle(con, landing_id, own)
    for r in unique:
        prior = before.get(r[key])
        if prior is None:
            report.inserted += 1
        elif prior == "error":
            report.retried += 1
        else:
            report.unchanged += 1
    report.unchanged += len(rows) - len(unique)
    return report


def land_generations(warehouse: str | Path, rows: Sequence[dict[str, Any]]) -> LandingReport:
    """Land generation rows; every failed attempt is also kept in raw.generation_errors."""
    bad = [r.get("status") for r in rows if r.get("status") not in ("ok", "empty", "error")]
    if bad:
        raise ValueError(
            f"generation status must be ok, empty or error; got {sorted(set(map(str, bad)))}"
        )
    return land_keyed(
        warehouse,
        "generations",
        "generation_id",
        "status",
        GENERATION_COLUMNS,
        rows,
        also=[
            "insert into raw.generation_errors (generation_id, run_id, error_message, landing_id) "
            "select generation_id, run_id, error_message, landing_id from incoming "
            "where status = 'error'",
            # a run's lease: it landed something just now
            "update raw.runs set heartbeat_at = now() where status = 'running' "
            "and run_id in (select distinct run_id from incoming)",
        ],
    )


def land_imported_generations(
    warehouse: str | Path, rows: Sequence[dict[str, Any]], supersede: Iterable[str] = ()
) -> tuple[LandingReport, int]:
    """Land imported generation rows in one transaction; returns the report and how many
    landed rows were superseded.

    A new key is inserted and a landed one is left as it is, except the keys in
    ``supersede``: the user re-imported them with a corrected text and asked to
    replace, so the landed row is first copied into raw.generation_history (with its
    landing, and the one replacing it) and then overwritten by the incoming one (the key
    stays, so later re-imports find it).
    """
    if not rows:
        return LandingReport(), 0
    if len({r["generation_id"] for r in rows}) != len(rows):  # the key is not indexed
        raise ValueError("imported generations repeat a generation_id; land each row once")
    replace = sorted(set(supersede))
    cols = ", ".join(GENERATION_COLUMNS)
    updates = ", ".join(f"{c} = i.{c}" for c in GENERATION_COLUMNS if c != "generation_id")
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "import-responses", None, _one_run(rows))
        con.register("incoming", _arrow(rows, GENERATION_COLUMNS, landing_id))
        ((present,),) = con.execute(
            "select count(*) from raw.generations join incoming using (generation_id)"
        ).fetchall()
        if replace:
            con.register("superseded", pa.table({"generation_id": pa.array(replace, pa.string())}))
            con.execute(
                "insert into raw.generation_history (generation_id, run_id, status, response_text, "
                "source, landed_at, replaced_by_run_id, landing_id, replaced_by_landing_id) "
                "select g.generation_id, g.run_id, g.status, g.response_text, g.source, "
                "g.created_at, i.run_id, g.landing_id, i.landing_id from raw.generations g "
                "join incoming i using (generation_id) join superseded using (generation_id)"
            )
            con.execute(
                f"update raw.generations as g set {updates}, created_at = now() from incoming i "
                "where g.generation_id = i.generation_id "
                "and g.generation_id in (select generation_id from superseded)"
            )
        con.execute(
            f"insert into raw.generations ({cols}) select {cols} from incoming i "
            "where not exists (select 1 from raw.generations g "
            "where g.generation_id = i.generation_id)"
        )
        _settle(con, landing_id, own)
    report = LandingReport(inserted=len(rows) - present, unchanged=present - len(replace))
    return report, len(replace)


@dataclass
class BatchLanding:
    """What ``land_response_batches`` found and did. It committed only when nothing below
    refused the file (``landed``); otherwise raw.* is as it was."""

    refused: bool = False
    """A row some rule refuses (a bad value, no such prompt, a key twice in the file): the
    caller names the rows with the row-by-row checks."""
    rows: int = 0
    inserted: int = 0
    unchanged: int = 0
    replaced: int = 0
    clashes: int = 0
    """Rows on a unit an audit generated."""
    clash_rows: list[int] = field(default_factory=list)
    """The first of them (file row numbers)."""
    clash_models: set[str] = field(default_factory=set)
    changed: int = 0
    """Rows already landed with another text."""
    changed_shown: list[tuple[dict[str, Any], str | None]] = field(default_factory=list)
    """The first of them: (incoming row, landed text)."""
    landed: bool = False


SHOWN = 5
"""Rows kept per refusal for its message."""

IMPORT_SETTINGS = {"memory_limit": "1GB", "preserve_insertion_order": "false"}
"""DuckDB's settings while an import lands. The limit: DuckDB keeps what it wrote cached
up to its memory limit (most of the machine by default); an import needs little and spills
the rest to disk (the Arrow batches come on top). The order: the rows of a table have none
a query can rely on, and an insert that need not keep it runs in parallel, 1.4x faster at
a million rows."""


def _literal(value: str | None) -> str:
    """A SQL string literal (a view cannot take parameters)."""
    return "null" if value is None else "'" + value.replace("'", "''") + "'"


def land_response_batches(
    warehouse: str | Path,
    batches: Iterable[Any],
    run_id: str | None = None,
    replace: bool = False,
    prepare: Callable[[Any], pa.Table] | None = None,
) -> BatchLanding:
    """Land an import's rows in one transaction: committed when every row passed, rolled
    back (nothing landed) at the first refused one.

    ``batches``: tables in ``response_batches.NORMALISED``, or whatever ``prepare`` makes
    one of (a batch as read from the file, checked and normalised). Two passes keep memory
    bounded by a window of batches. First each batch is prepared, keyed in DuckDB and
    checked, on as many threads as there are cores (``_prepared``), and each window is
    written, ordered by answer (``_clustered``), to a Parquet file in a scratch folder
    beside the warehouse (removed after). Then one transaction checks
    the whole file against the landed rows (a key twice in the file, a unit an audit
    generated, a landed key whose text changed: kept to name, or superseded with
    ``replace``) and inserts it with one statement; a key already landed with the same text
    is left as it is. DuckDB writes one large insert out as it goes, where many inserts in
    one transaction stay in memory until the commit (the import command peaked at 2.65 GB
    at a million rows that way, 1.38 GB this way).
    """
    out = BatchLanding()
    with WRITE_LOCK:
        con = connect(warehouse)
        try:
            folder = Path(warehouse).resolve().parent
            remove_stale_scratch(folder)
            with (
                _import_settings(con),
                tempfile.TemporaryDirectory(
                    prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=folder
                ) as scratch,
            ):
                staged = Path(scratch) / "rows.parquet"
                staged_ok = _stage_batches(con, _prepared(batches, prepare), staged, out)
                # the batches are gone: hand their memory back before DuckDB takes its own
                pa.default_memory_pool().release_unused()
                if staged_ok:
                    _land_staged(con, staged, out, run_id, replace)
        finally:
            con.close()
    return out


PREPARE_THREADS = max(1, min(4, available_cores()))
"""Batches prepared and keyed at once, one per core this process may run on (four at most:
each holds a batch): the work is Arrow's, Parquet's and DuckDB's, which release the GIL, so
threads use the cores (bench/landing.py)."""


def _prepared(
    batches: Iterable[Any], prepare: Callable[[Any], pa.Table] | None
) -> Iterator[pa.Table]:
    """Each batch prepared and keyed (``_keyed``), in order: the batches read one ahead on a
    thread of their own (``_read_ahead``), ``PREPARE_THREADS`` of them prepared at a time."""
    return _ordered_map(
        lambda batch: _keyed(prepare(batch) if prepare else batch),
        _read_ahead(batches),
        PREPARE_THREADS,
    )


def _keyed(normalised: pa.Table) -> pa.Table:
    """``normalised`` with its ``generation_id`` and ``decoding_json`` columns, computed by
    an in-memory DuckDB of its own (the expressions a warehouse would run), so that batches
    are keyed on several threads at once."""
    from ableaudit.ingest.response_batches import decoding_sql, key_sql

    con = duckdb.connect(config={"threads": 1})
    try:
        con.register("import_normalised", normalised)
        keys = con.sql(
            f"select {key_sql('b')} as generation_id, "
            f"{decoding_sql('b')} as decoding_json from import_normalised b"
        ).to_arrow_table()
    finally:
        con.close()
    if keys.num_rows != normalised.num_rows:
        raise RuntimeError("the keys of a batch do not match its rows")
    return normalised.append_column("generation_id", keys.column("generation_id")).append_column(
        "decoding_json", keys.column("decoding_json")
    )


def _ordered_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int) -> Iterator[Any]:
    """``fn`` of each item, in the items' order, up to ``workers`` at a time on threads; an
    error of ``fn`` is raised here, at the item it concerns (the later ones are dropped)."""
    it = iter(items)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="import-prepare") as pool:
        pending: deque = deque(pool.submit(fn, item) for item in islice(it, workers))
        try:
            while pending:
                result = pending.popleft().result()
                for item in islice(it, 1):
                    pending.append(pool.submit(fn, item))
                yield result
        finally:
            for future in pending:
                future.cancel()
            if hasattr(it, "close"):  # a generator: its own threads end with it
                it.close()


def _read_ahead(batches: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """``batches`` with the next one read on a second thread while the caller works on the
    current one: both sides spend their time in Arrow, Parquet and DuckDB, which release the
    GIL, so they overlap. One batch more is held at a time; an error of the reading side is
    raised here, at the batch it concerns."""
    it = iter(batches)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-read") as reader:
        ahead = reader.submit(next, it, None)
        while (batch := ahead.result()) is not None:
            ahead = reader.submit(next, it, None)
            yield batch


SCRATCH_PREFIX = ".ableaudit-import-"
"""The scratch folders of imports, beside the warehouse: ``<prefix><pid>-<random>``."""


def remove_stale_scratch(folder: Path) -> list[Path]:
    """Remove from ``folder`` the scratch folders of killed imports (their process is gone),
    and return them; a running import keeps its own."""
    from ableaudit.warehouse.publish import writer_gone

    removed = []
    for path in folder.glob(SCRATCH_PREFIX + "*"):
        pid = path.name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
        try:
            stale = pid.isdigit() and writer_gone(int(pid), path.stat().st_mtime)
        except FileNotFoundError:
            continue  # its import just ended
        if stale and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


@contextmanager
def _import_settings(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """``IMPORT_SETTINGS`` while an import lands, the database's own after (a setting holds
    for every connection to the file)."""
    before = {
        name: con.execute(f"select current_setting('{name}')").fetchall()[0][0]
        for name in IMPORT_SETTINGS
    }
    try:
        for name, value in IMPORT_SETTINGS.items():
            con.execute(f"set {name} = {_literal(value)}")
        yield
    finally:
        for name, value in before.items():
            con.execute(f"set {name} = {_literal(str(value))}")


def _stage_batches(
    con: duckdb.DuckDBPyConnection, batches: Iterable[pa.Table], staged: Path, out: BatchLanding
) -> bool:
    """Check each keyed batch and write it to ``staged``; false when a row is refused
    (``out.refused``) or there is none."""
    writer = None
    window: list[pa.Table] = []

    def write(tables: list[pa.Table]) -> None:
        nonlocal writer
        rows = _clustered(tables)
        for start in range(0, rows.num_rows, STAGED_GROUP_ROWS):
            group = _used_texts(rows.slice(start, STAGED_GROUP_ROWS))
            if writer is None:
                # read once, a moment later, from local disk: compressing it cost the
                # staging thread more than the bytes it saved (224 MB at a million rows)
                writer = pq.ParquetWriter(staged, group.schema, compression="none")
            writer.write_table(group.cast(writer.schema), row_group_size=STAGED_GROUP_ROWS)

    try:
        for batch in batches:
            out.rows += batch.num_rows
            if not pc.all(batch.column("ok")).as_py():
                out.refused = True
                return False
            window.append(batch)
            if (
                sum(t.num_rows for t in window) >= STAGED_WINDOW_ROWS
                or sum(t.column("response_text").nbytes for t in window) >= STAGED_WINDOW_BYTES
            ):
                write(window)
                window = []
        if window:
            write(window)
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        return False
    # a key twice in the file, in one batch or two
    ((twice,),) = con.execute(
        "select count(*) - count(distinct generation_id) from read_parquet(?)", [str(staged)]
    ).fetchall()
    out.refused = bool(twice)
    return not out.refused


STAGED_WINDOW_ROWS = 262_144
"""Rows staged together, ordered by their answer (``_clustered``)..."""
STAGED_WINDOW_BYTES = 128 * 2**20
"""... or fewer, when their answers take this many bytes: distinct answers repeat little,
and a window of them is as large as its texts."""
STAGED_GROUP_ROWS = 16_384
"""Rows per row group of the staged file: DuckDB reads a row group's dictionary of answers
whole, and at 16,384 distinct answers of ~250 words that is about 26 MB."""


def _clustered(tables: list[pa.Table]) -> pa.Table:
    """``tables`` as one table whose rows are ordered by answer, equal answers side by side.

    An import's answers repeat (the same answer to a prompt at several temperatures or
    samples, the same refusal to many prompts), and DuckDB stores a run of equal texts in a
    segment once, in its dictionary. Inserted in file order, the repeats are scattered and
    every copy is compressed and stored again: a million rows drawing on 20,000 answers
    now land in a warehouse file 0.36x the size, in less time (docs/benchmarks.md,
    "Answers landed side by side"). The rows are sorted by the codes of the answers'
    shared dictionary, an integer sort; no order of ``raw.generations`` is promised, and
    ``_row`` still names each row.
    """
    table = pa.concat_tables(tables).unify_dictionaries()
    texts = table.column("response_text")
    codes = pa.chunked_array([chunk.indices for chunk in texts.chunks], type=texts.type.index_type)
    return table.take(pc.sort_indices(codes))


def _used_texts(table: pa.Table) -> pa.Table:
    """``table`` with each chunk of ``response_text`` holding only the answers its rows use.

    A slice of a window carries the whole window's dictionary, and a Parquet writer
    writes the dictionary it is given into each row group, which DuckDB then reads
    whole: staged with dictionaries wider than their rows, a million rows drawing on
    20,000 answers took 500 MB of scratch file, and 300,000 distinct answers ran
    DuckDB's read of it out of its memory limit.
    """
    i = table.schema.get_field_index("response_text")
    chunks = []
    for chunk in table.column(i).chunks:
        used = pc.unique(chunk.indices).drop_null()
        chunks.append(
            pa.DictionaryArray.from_arrays(
                pc.index_in(chunk.indices, value_set=used), chunk.dictionary.take(used)
            )
        )
    return table.set_column(i, table.field(i), pa.chunked_array(chunks, type=table.field(i).type))


def _land_staged(
    con: duckdb.DuckDBPyConnection,
    staged: Path,
    out: BatchLanding,
    run_id: str | None,
    replace: bool,
) -> None:
    """Check the staged rows against the landed ones and land them, in one transaction."""
    cols = ", ".join(GENERATION_COLUMNS)
    updates = ", ".join(f"{c} = i.{c}" for c in GENERATION_COLUMNS if c != "generation_id")
    unit = ("task", "model_id", "arm", "query_set", "query_id", "disability_id")
    same_unit = " and ".join(f"b.{c} is not distinct from g.{c}" for c in unit)
    # a blank temperature is any temperature: it meets every generated one
    same_unit += " and (b.temperature is null or b.temperature = g.temperature)"
    con.execute("begin transaction")
    try:
        landing_id, own = _landing_for(con, "import-responses", None, run_id)
        con.execute(
            "create or replace temp view import_batch as select *, "
            f"{_literal(run_id)}::varchar as run_id, model_id as target, "
            "'import' as backend, null::varchar as model_revision, "
            "null::varchar as adapter, null::varchar as system_prompt, "
            "null::double as top_p, null::integer as max_new_tokens, "
            "null::bigint as seed, null::varchar as finish_reason, "
            "null::varchar as error_message, null::integer as prompt_tokens, "
            "null::integer as completion_tokens, null::double as latency_ms, "
            f"'imported' as source, {_literal(landing_id)} as landing_id "
            f"from read_parquet({_literal(str(staged))})"
        )
        # nothing landed before this import: no key of it can be landed already nor clash
        # with a generated unit, so the checks below, each a scan of every landed text, are
        # skipped
        ((landed_before,),) = con.execute("select count(*) from raw.generations").fetchall()
        present = 0
        if landed_before:
            con.execute(
                "create or replace temp table import_clash as "
                "select b._row, b.model_id from import_batch b where exists ("
                "select 1 from raw.generations g where g.source = 'generated' "
                "and g.model_id in (select distinct model_id from import_batch) "
                f"and g.sample_index = b.sample_index and {same_unit})"
            )
            ((out.clashes,),) = con.execute("select count(*) from import_clash").fetchall()
            if out.clashes:
                out.clash_rows = [
                    n
                    for (n,) in con.execute(
                        "select _row from import_clash order by _row limit ?", [SHOWN]
                    ).fetchall()
                ]
                out.clash_models = {
                    m
                    for (m,) in con.execute("select distinct model_id from import_clash").fetchall()
                }
            # rows already landed with another text, kept for the message and for
            # superseding them under --replace
            con.execute(
                "create or replace temp table import_changed as "
                "select b._row, b.generation_id, b.model_id, b.prompt_id, b.sample_index, "
                "b.response_text, g.response_text as landed_text "
                "from import_batch b join raw.generations g using (generation_id) "
                "where coalesce(g.response_text, '') <> b.response_text"
            )
            ((present,),) = con.execute(
                "select count(*) from import_batch join raw.generations using (generation_id)"
            ).fetchall()
            ((out.changed,),) = con.execute("select count(*) from import_changed").fetchall()
            if out.changed:
                shown = con.execute(
                    "select * exclude (landed_text), landed_text from import_changed "
                    "order by _row limit ?",
                    [SHOWN],
                )
                names = [d[0] for d in shown.description][:-1]
                out.changed_shown = [
                    (dict(zip(names, r[:-1], strict=True)), r[-1]) for r in shown.fetchall()
                ]
            if out.clashes or (out.changed and not replace):
                con.execute("rollback")
                return
            if out.changed:
                con.execute(
                    "insert into raw.generation_history (generation_id, run_id, status, "
                    "response_text, source, landed_at, replaced_by_run_id, landing_id, "
                    "replaced_by_landing_id) select g.generation_id, g.run_id, g.status, "
                    "g.response_text, g.source, g.created_at, i.run_id, g.landing_id, "
                    "i.landing_id from raw.generations g join import_batch i "
                    "using (generation_id) join import_changed using (generation_id)"
                )
                con.execute(
                    f"update raw.generations as g set {updates}, created_at = now() "
                    "from import_batch i where g.generation_id = i.generation_id "
                    "and g.generation_id in (select generation_id from import_changed)"
                )
                out.replaced = out.changed
        # a key landed before stays as it is (or was superseded just above)
        con.execute(
            f"insert into raw.generations ({cols}) select {cols} from import_batch"
            + (
                " b where not exists (select 1 from raw.generations g "
                "where g.generation_id = b.generation_id)"
                if present
                else ""
            )
        )
        _settle(con, landing_id, own)
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    out.inserted = out.rows - present
    out.unchanged = present - out.replaced
    out.landed = True


# --------------------------------------------------------------------------- judgments

CALL_STATUSES = ("ok", "error")


def _check(rows: Sequence[dict[str, Any]]) -> None:
    problems = []
    for r in rows:
        cs, ps = r.get("call_status"), r.get("parse_status")
        if cs not in CALL_STATUSES:
            problems.append(f"{r.get('judgment_id')}: call_status {cs!r} is not ok|error")
        elif cs == "error" and (ps is not None or r.get("parsed_json") is not None):
            problems.append(f"{r.get('judgment_id')}: an error row has no parse result")
        elif cs == "ok" and ps not in ("parsed", "repaired", "unparseable"):
            problems.append(
                f"{r.get('judgment_id')}: parse_status {ps!r} is not parsed|repaired|unparseable"
            )
        elif ps == "unparseable" and r.get("parsed_json") is not None:
            problems.append(
                f"{r.get('judgment_id')}: an unparseable verdict cannot carry parsed_json"
            )
        if r.get("judge_kind") not in ("rubric", "contrastive"):
            problems.append(f"{r.get('judgment_id')}: judge_kind {r.get('judge_kind')!r}")
    if problems:
        raise ValueError("judgment rows break the landing rules: " + "; ".join(problems[:10]))


def landed_judgment_keys(warehouse: str | Path, keys: Iterable[str]) -> set[str]:
    """Keys already landed with call_status 'ok' (a cache hit); errors are not 'done'."""
    keys = list(keys)
    if not keys:
        return set()
    con = connect(warehouse)
    try:
        con.register("wanted_keys", pa.table({"judgment_id": pa.array(keys, pa.string())}))
        found = con.execute(
            "select j.judgment_id from raw.judgments j join wanted_keys w using (judgment_id) where j.call_status = 'ok'"
        ).fetchall()
        return {k for (k,) in found}
    finally:
        con.close()


def land_judgments(warehouse: str | Path, rows: Sequence[dict[str, Any]]) -> LandingReport:
    """Land verdict rows in one transaction; see the module docstring for the rules."""
    if rows:
        _check(rows)
    return land_keyed(warehouse, "judgments", "judgment_id", "call_status", JUDGMENT_COLUMNS, rows)


# --------------------------------------------------------------------------- runs


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


# --------------------------------------------------------------------------- reference data


def replace_query_set(
    warehouse: str | Path | None,
    query_set: str,
    rows: Sequence[dict[str, Any]],
    source_file: str | None,
) -> int:
    """Make ``raw.external_queries`` hold exactly ``rows`` for ``query_set`` (validated by the caller).

    A landed row equal to an incoming one stays as it is (with the landing that wrote it), so
    loading the same file again writes nothing; the rest of the set is replaced.
    """
    columns = raw_schema.table("external_queries").arrow_columns()
    same = " and ".join(f"e.{c} is not distinct from i.{c}" for c in columns if c != "landing_id")
    with writing(warehouse) as con:
        landing_id, own = _landing_for(
            con, "import-queries", source_file or f"query set {query_set}"
        )
        batch = [{**r, "query_set": query_set, "source_file": source_file} for r in rows]
        con.register("incoming_queries", _arrow(batch, columns, landing_id))
        con.execute(
            "delete from raw.external_queries e where e.query_set = ? "
            f"and not exists (select 1 from incoming_queries i where {same})",
            [query_set],
        )
        cols = ", ".join(columns)
        con.execute(
            f"insert into raw.external_queries ({cols}) select {cols} from incoming_queries i "
            "where not exists (select 1 from raw.external_queries e "
            f"where e.query_set = ? and {same})",
            [query_set],
        )
        _settle(con, landing_id, own)
    return len(rows)


def replace_images(
    warehouse: str | Path | None,
    image_set: str,
    rows: Sequence[dict[str, Any]],
    stale_ids: Sequence[str],
    candidates: Sequence[dict[str, Any]] | None = None,
) -> None:
    """Remove ``stale_ids`` of ``image_set`` and insert ``rows`` (validated by the caller); with
    ``candidates``, make them the set's raw.image_candidates in the same transaction."""
    images = raw_schema.table("images").arrow_columns()
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "images", f"image set {image_set}")
        if candidates is not None:
            con.execute("delete from raw.image_candidates where image_set = ?", [image_set])
            columns = raw_schema.table("image_candidates").arrow_columns()
            con.register("incoming_candidates", _arrow(candidates, columns, landing_id))
            cols = ", ".join(columns)
            con.execute(
                f"insert into raw.image_candidates ({cols}) select {cols} from incoming_candidates"
            )
        if stale_ids:
            con.executemany(
                "delete from raw.images where image_set = ? and image_id = ?",
                [[image_set, i] for i in stale_ids],
            )
        if rows:
            con.register("incoming_images", _arrow(rows, images, landing_id))
            cols = ", ".join(images)
            con.execute(f"insert into raw.images ({cols}) select {cols} from incoming_images")
        _settle(con, landing_id, own)


def land_annotations(
    warehouse: str | Path | None, rows: Sequence[dict[str, Any]]
) -> tuple[int, int, list[dict]]:
    """Insert new ratings and update changed ones; returns (inserted, unchanged, replaced) where
    ``replaced`` lists each changed rating with its old and new value."""
    columns = raw_schema.table("annotations").arrow_columns()
    with writing(warehouse) as con:
        files = {r.get("source_file") for r in rows}
        source = files.pop() if len(files) == 1 else None
        landing_id, own = _landing_for(con, "import-annotations", source)
        con.register("annotation_incoming", _arrow(rows, columns, landing_id))
        existing = dict(
            con.execute(
                "select a.annotation_id, a.value from raw.annotations a "
                "inner join annotation_incoming i on i.annotation_id = a.annotation_id"
            ).fetchall()
        )
        new = [r["annotation_id"] for r in rows if r["annotation_id"] not in existing]
        changed = [
            r
            for r in rows
            if r["annotation_id"] in existing and existing[r["annotation_id"]] != r["value"]
        ]
        if new:
            con.execute(
                "insert into raw.annotations by name "
                "select i.*, current_timestamp as loaded_at from annotation_incoming i "
                "where i.annotation_id in (select unnest(?::varchar[]))",
                [new],
            )
        if changed:
            con.execute(
                "update raw.annotations as a set value = i.value, value_num = i.value_num, "
                "batch_id = i.batch_id, source_file = i.source_file, loaded_at = current_timestamp, "
                "landing_id = i.landing_id "
                "from annotation_incoming i where a.annotation_id = i.annotation_id "
                "and a.annotation_id in (select unnest(?::varchar[]))",
                [[r["annotation_id"] for r in changed]],
            )
        _settle(con, landing_id, own)
    replaced = [
        {
            "item_id": r["item_id"],
            "dimension": r["dimension"],
            "annotator_id": r["annotator_id"],
            "old_value": existing[r["annotation_id"]],
            "new_value": r["value"],
        }
        for r in changed
    ]
    return len(new), len(rows) - len(new) - len(changed), replaced


def add_adapter(
    warehouse: str | Path | None,
    name: str,
    kind: str,
    place: Callable[[int], tuple[dict[str, Any], Callable[[], None]]],
) -> dict[str, Any]:
    """Register the next version of adapter ``name``: ``place(version)`` puts its files in
    place and returns its row and how to undo that; the row lands in the same transaction,
    and a failure undoes the placing. Returns the row as landed (with ``created_at``)."""
    from ableaudit.adapters.registry import RegistryError

    undo: Callable[[], None] | None = None
    try:
        with writing(warehouse) as con:
            kinds = {
                k
                for (k,) in con.execute(
                    "select distinct kind from raw.adapters where name = ?", [name]
                ).fetchall()
            }
            if kinds - {kind}:
                raise RegistryError(
                    f"adapter name {name!r} is already used by a {sorted(kinds)[0]} adapter; "
                    "choose another name"
                )
            (latest,) = con.execute(
                "select coalesce(max(version), 0) from raw.adapters where name = ?", [name]
            ).fetchone()
            row, undo = place(int(latest) + 1)
            landing_id, own = _landing_for(con, "adapter", str(row.get("path")))
            cols = [c.name for c in raw_schema.table("adapters").written()]
            con.execute(
                f"insert into raw.adapters ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                [landing_id if c == "landing_id" else row.get(c) for c in cols],
            )
            _settle(con, landing_id, own)
            (created,) = con.execute(
                "select created_at from raw.adapters where adapter_id = ?", [row["adapter_id"]]
            ).fetchone()
    except BaseException:
        if undo is not None:
            undo()
        raise
    return {**row, "created_at": created}


def land_text_scores(warehouse: str | Path | None, scores: pa.Table) -> LandingReport:
    """Land per-text scores (``raw.text_scores`` columns, as Arrow) in one transaction.

    A (text_hash, scorer, scorer_version) already landed is left as it was, so landing the
    same scores again writes nothing; within ``scores`` one row of a key lands.
    """
    report = LandingReport()
    if not scores.num_rows:
        return report
    columns = raw_schema.table("text_scores").arrow_columns()
    given = [c for c in columns if c != "landing_id"]
    missing = [
        c
        for c in ("text_hash", "scorer", "scorer_version", "status")
        if c not in scores.column_names
    ]
    if missing:
        raise ValueError(f"text scores lack the column(s) {', '.join(missing)}")
    arrays = {
        c: scores[c].cast(columns[c])
        if c in scores.column_names
        else pa.nulls(scores.num_rows, columns[c])
        for c in given
    }
    key = "text_hash, scorer, scorer_version"
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "score", None)
        arrays["landing_id"] = pa.array([landing_id] * scores.num_rows, pa.string())
        con.register("incoming_scores", pa.table(arrays))
        cols = ", ".join(columns)
        (inserted,) = con.execute(
            f"insert into raw.text_scores ({cols}) "
            f"select {cols} from incoming_scores "
            f"qualify row_number() over (partition by {key}) = 1 "
            f"on conflict ({key}) do nothing"
        ).fetchone()
        _settle(con, landing_id, own)
    report.inserted = int(inserted)
    report.unchanged = scores.num_rows - report.inserted
    return report


def update_judgment_parses(
    warehouse: str | Path, changed: Sequence[tuple[str, str | None, str | None, str]]
) -> None:
    """Rewrite (parse_status, parsed_json, parse_notes) of landed verdicts, keyed by judgment_id
    (the judge's own text is never changed)."""
    if not changed:
        return
    with writing(warehouse) as con:
        con.executemany(
            "update raw.judgments set parse_status = ?, parsed_json = ?, parse_notes = ? "
            "where judgment_id = ?",
            list(changed),
        )


# --------------------------------------------------------------------------- history and forget


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
