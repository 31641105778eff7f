"""An import's responses landed in one transaction, with memory bounded by a window of batches.

The batches are prepared and keyed on threads (Arrow, Parquet and DuckDB release the GIL),
staged in a scratch Parquet file beside the warehouse, ordered by answer, and then checked
against the landed rows and inserted with one statement (``land_response_batches``). The
rules of what lands are the landing layer's (``ableaudit.warehouse.landing``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ableaudit.cores import available_cores
from ableaudit.keys import imported_decoding_sql, imported_key_sql
from ableaudit.warehouse.connection import WRITE_LOCK, connect
from ableaudit.warehouse.landing import GENERATION_COLUMNS, _landing_for, _settle


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
    con = duckdb.connect(config={"threads": 1})
    try:
        con.register("import_normalised", normalised)
        keys = con.sql(
            f"select {imported_key_sql('b')} as generation_id, "
            f"{imported_decoding_sql('b')} as decoding_json from import_normalised b"
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
