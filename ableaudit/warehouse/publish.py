"""Publish the warehouse for BI: a read-only copy that DuckDB 1.x clients open, and Parquet files.

BI tools never read the live file: DuckDB lets one process write, and a reader
would block the next build. After each build, ``publish`` writes

- ``published/<warehouse name>.duckdb`` (``published/ableaudit.duckdb`` for the
  default warehouse): every relation of the warehouse as a plain table, in an
  older DuckDB storage format (``DEFAULT_STORAGE_VERSION``), because most BI
  tools embed a DuckDB 1.x, which refuses the format the project's DuckDB
  writes by default. A view is materialised: a client without the project's
  Python (and its user-defined functions) could not run it, and older clients
  could not bind some of it. A view that cannot be read even here is left out.
  Columns in ``WITHHELD_COLUMNS`` (the stored audit and training configs) never
  reach the copy. ``publish.relations`` in the copy says what it holds and what
  it left out.
- ``published/<warehouse name>/parquet/<mart>.parquet``: one file per mart (and
  per relation of ``EXTRA_RELATIONS``), in a folder of its own per warehouse, so
  two warehouses publishing into one folder never overwrite each other. A mart of
  ``PARQUET_BY_MODEL`` (``pair_details``, which holds the answers) is a folder of
  one file per model instead.

A publish starts from a former copy when there is one in the same storage
version: the standby (``published/.<warehouse name>.standby.duckdb``: the copy the
previous publish replaced, kept as a second name of that file), else a copy of the
previous copy. It leaves each relation whose rows did not change as it is, and for
a relation that changed deletes the rows that are gone and inserts the new ones. A
relation with a ``model_id`` is compared model by model, against the fingerprints
that copy recorded (``publish.relation_groups``), and the rows of each changed model
replaced whole; any other, row by row (a multiset difference of row hashes); a
relation whose columns changed, or more than half of whose rows changed, is written
again whole, and so is the whole copy when more than half of its file is free space.
A build after one more model so rewrites only the rows it added (from the standby,
those of the last two builds), not every relation, nor, from the standby, the whole
file first (2.4 GB at a million generations). The Parquet file of a mart unchanged
since the previous copy is kept when it is still the file the previous publish wrote
(``publish.parquet_files`` records each file's size, modification time and inode);
of a mart written a file per model, the files of the models whose rows did not
change are kept.

Each file is first written under a hidden temporary name carrying the
writer's pid (``.<stem>.<pid>.tmp.duckdb``, ``.<mart>.<pid>.tmp.parquet``) and
then moved into place with ``os.replace``, so a reader sees the previous
complete copy or the new one, never half of one. A publish that was killed
leaves its temporary files behind; the next publish removes those whose writer
is gone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psutil
import pyarrow as pa

from ableaudit import PROJECT_ROOT
from ableaudit.warehouse import warehouse_path
from ableaudit.warehouse.connection import apply_memory_limit

log = logging.getLogger(__name__)

MARTS_DIRS = (PROJECT_ROOT / "models" / "marts", PROJECT_ROOT / "python_models" / "marts")

STORAGE_VERSION_ENV = "ABLEAUDIT_PUBLISH_STORAGE_VERSION"
# The oldest storage format every DuckDB client from 1.1 on reads in full, for
# every type the marts use (measured with DuckDB 1.1.3, 1.2.2, 1.3.2, 1.4.4 and
# 1.5.6; see docs/bi.md). Older labels (v0.10.0, v1.0.0) write the same storage
# number, but DuckDB 1.0 fails on list columns whose lists are all empty.
DEFAULT_STORAGE_VERSION = "v1.1.0"

# Columns that hold a stored config: never published, in any relation.
# raw.runs.config_json is the audit config of a run; raw.adapters.params_json
# is the training config of an adapter.
WITHHELD_COLUMNS: frozenset[str] = frozenset({"config_json", "params_json"})

# Relations ("schema.name", or "name" for the main schema) exported as Parquet
# besides the marts, and required to exist, e.g. a response-level export table
# built by dbt. Every relation is in the copy anyway.
EXTRA_RELATIONS: tuple[str, ...] = ()

MANIFEST_SCHEMA = "publish"
MANIFEST_TABLE = "relations"
GROUPS_TABLE = "relation_groups"
FILES_TABLE = "parquet_files"
DEFINITIONS_TABLE = "view_definitions"

# The column whose values split a relation into the groups a publish compares and replaces
# whole: a model's rows change together when it lands or is built again.
GROUP_COLUMN = "model_id"

# Not published: the catalogs, and dbt_state, the bookkeeping of incremental builds
# (docs/incremental.md), which means nothing outside the warehouse it describes.
_UNPUBLISHED_SCHEMAS = ("information_schema", "pg_catalog", "dbt_state")
_COPY = "published_copy"
_TMP_COPY = re.compile(r"^\.(?P<stem>.+)\.(?P<pid>\d+)\.tmp\.duckdb(?:\.wal)?$")
_TMP_PARQUET = re.compile(r"^\.(?P<stem>.+)\.(?P<pid>\d+)\.tmp\.parquet$")
# Process start times are kept to a fraction of a second; a file written by the
# live process holding a pid is never older than that process by more than this.
_START_SLACK_S = 1.0


@dataclass(frozen=True)
class PublishedRelation:
    """One relation of the live warehouse and what the copy made of it (a row of publish.relations)."""

    schema: str
    """Its schema in the warehouse (and in the copy)."""
    name: str
    """Its name."""
    kind: str
    """'table' or 'view' in the live warehouse; in the copy every relation is a table."""
    published: bool
    """Whether the copy holds it."""
    n_rows: int | None
    """Rows in the copy; None when left out."""
    withheld_columns: tuple[str, ...]
    """Columns of the warehouse relation the copy leaves out (stored configs)."""
    note: str | None
    """Why it was left out, or what was withheld; None when copied whole."""
    change: str | None = None
    """What this publish did to it in the copy: 'written' (whole, into a fresh table),
    'updated' (rows deleted and inserted in the previous copy's table) or 'unchanged';
    None when left out."""


def mart_names(marts_dirs: tuple[Path, ...] = MARTS_DIRS) -> list[str]:
    """Every model under models/marts and python_models/marts (one .sql or .py file per mart)."""
    return sorted(p.stem for d in marts_dirs for p in d.rglob("*") if p.suffix in (".sql", ".py"))


def resolve_storage_version(storage_version: str | None = None) -> str:
    """The storage format to publish in: the argument, else $ABLEAUDIT_PUBLISH_STORAGE_VERSION, else the default.

    A bare '1.2.0' means 'v1.2.0'; 'latest' is the project's own DuckDB's format
    (which DuckDB 1.x clients refuse).
    """
    chosen = (
        storage_version or os.environ.get(STORAGE_VERSION_ENV) or DEFAULT_STORAGE_VERSION
    ).strip()
    if re.fullmatch(r"\d+\.\d+\.\d+", chosen):
        chosen = "v" + chosen
    return chosen


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def writer_gone(pid: int, mtime: float) -> bool:
    """Whether the process that wrote a temporary file (named with its pid) can no longer be writing it."""
    if pid == os.getpid():
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return True
        # the pid now names a process started after the file was last written: a reused pid
        return mtime < proc.create_time() - _START_SLACK_S
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def remove_stale_temps(*folders: Path) -> list[Path]:
    """Remove the temporary files of killed publishes from ``folders``; return what was removed.

    Only files named like a publish's temporaries whose writer is gone: its pid
    is not alive, or now names a process younger than the file. A publish that
    is still running keeps its files.
    """
    removed = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            match = _TMP_COPY.match(path.name) or _TMP_PARQUET.match(path.name)
            if not match or not path.is_file():
                continue
            try:
                stale = writer_gone(int(match["pid"]), path.stat().st_mtime)
            except FileNotFoundError:
                continue  # its writer just moved it into place
            if stale:
                path.unlink(missing_ok=True)
                removed.append(path)
    if removed:
        log.info(
            "removed temporary files of killed publishes: %s", ", ".join(str(p) for p in removed)
        )
    return removed


def _relations(con: duckdb.DuckDBPyConnection, catalog: str) -> list[tuple[str, str, str]]:
    """(schema, name, 'table' | 'view') of every relation of the attached warehouse."""
    return con.execute(
        """
        select schema_name, table_name, 'table' from duckdb_tables()
        where database_name = $catalog and not internal
            and not list_contains($unpublished, schema_name)
        union all
        select schema_name, view_name, 'view' from duckdb_views()
        where database_name = $catalog and not internal
            and not list_contains($unpublished, schema_name)
        order by 1, 2
        """,
        {"catalog": catalog, "unpublished": list(_UNPUBLISHED_SCHEMAS)},
    ).fetchall()


def _split(relation: str) -> tuple[str, str]:
    schema, _, name = relation.rpartition(".")
    return schema or "main", name


def _parquet_stem(schema: str, name: str) -> str:
    return name if schema == "main" else f"{schema}.{name}"


def _parquet_select(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> str:
    """The query that exports a relation of the copy to Parquet.

    Parquet has no 128-bit integer: DuckDB would write a HUGEINT (what ``sum``
    of integers returns, e.g. a count of outcomes) as a DOUBLE. Such columns
    are written as BIGINT, exact for every count; a value beyond BIGINT fails
    the publish instead of losing digits.
    """
    columns = con.execute(
        "select column_name, data_type from duckdb_columns() where database_name = ? and schema_name = ? "
        "and table_name = ? order by column_index",
        [_COPY, schema, name],
    ).fetchall()
    select = [
        f"cast({_quote(c)} as bigint) as {_quote(c)}" if t in ("HUGEINT", "UHUGEINT") else _quote(c)
        for c, t in columns
    ]
    return f"select {', '.join(select)} from {_COPY}.{_quote(schema)}.{_quote(name)}"


def _columns(
    con: duckdb.DuckDBPyConnection, catalog: str, schema: str, name: str
) -> list[tuple[str, str]]:
    """(name, type) of each column of a relation of an attached database, in order."""
    return con.execute(
        "select column_name, data_type from duckdb_columns() where database_name = ? and schema_name = ? "
        "and table_name = ? order by column_index",
        [catalog, schema, name],
    ).fetchall()


def fingerprint(con: duckdb.DuckDBPyConnection, select: str) -> tuple[int, int, int]:
    """Rows, and the sum and exclusive or of their hashes, of a query: equal for the same
    multiset of rows, in one streaming pass (no sort, no hash table)."""
    count, total, xor = con.execute(
        f"select count(*), coalesce(sum(h), 0), coalesce(bit_xor(h), 0) "
        f"from (select hash(*columns(*)) as h from ({select}))"
    ).fetchone()
    return int(count), int(total), int(xor)


REWRITE_CHANGED_SHARE = 0.5
"""A relation is written whole, rather than updated row by row, when more than this share of
the previous copy's rows changed (deleting and inserting most of a table costs more than
writing it, and leaves free blocks behind)."""


def _changed_hashes(con: duckdb.DuckDBPyConnection) -> None:
    """Fill ``publish_changed`` with every row hash whose count differs between
    ``publish_live`` and ``publish_copied``: the hashes of new, gone and changed rows.

    The hashes held on one side only come from two anti joins, which build no table of counts.
    That misses a row held on both sides a different number of times (a duplicate added or
    removed); then the rows left out of ``publish_changed`` differ between the sides, their
    fingerprints tell, and every hash's count is compared instead.
    """
    con.execute(
        """
        create or replace temp table publish_changed as
        select h from publish_live anti join publish_copied using (h)
        union
        select h from publish_copied anti join publish_live using (h)
        """
    )
    rest = "select h from {} anti join publish_changed using (h)"
    if fingerprint(con, rest.format("publish_live")) == fingerprint(
        con, rest.format("publish_copied")
    ):
        return
    con.execute(
        """
        create or replace temp table publish_changed as
        with live as (select h, count(*) as n from publish_live group by h),
            copied as (select h, count(*) as n from publish_copied group by h)
        select coalesce(live.h, copied.h) as h
        from live full join copied on live.h = copied.h
        where live.n is distinct from copied.n
        """
    )


def _update_rows(
    con: duckdb.DuckDBPyConnection, source: str, target: str, columns: str, source_is_table: bool
) -> str:
    """Make ``target`` hold the rows of ``source`` by replacing only the rows that differ;
    return 'unchanged', 'updated', or 'rewrite' (nothing done: most rows changed).

    Each side is read and hashed once, into a temporary table of row hashes (with the rowid,
    for a table). The two are equal when their fingerprints are; otherwise every row of a
    hash whose count differs (new, gone, or changed rows) is deleted from ``target`` and
    inserted again from ``source``. A view is computed a second time only then, for the rows
    of those hashes.
    """
    rowid = "rowid as rid, " if source_is_table else ""
    con.execute(
        f"create or replace temp table publish_live as select {rowid}hash({columns}) as h from {source}"
    )
    con.execute(
        f"create or replace temp table publish_copied as select rowid as rid, hash({columns}) as h from {target}"
    )
    try:
        same = fingerprint(con, "select h from publish_live") == fingerprint(
            con, "select h from publish_copied"
        )
        if same:
            return "unchanged"
        _changed_hashes(con)
        changed = "(select h from publish_changed)"
        gone, copied = con.execute(
            f"select count(*) filter (where h in {changed}), count(*) from publish_copied"
        ).fetchone()
        if gone > REWRITE_CHANGED_SHARE * copied:
            return "rewrite"
        con.execute(
            f"delete from {target} where rowid in (select rid from publish_copied where h in {changed})"
        )
        if source_is_table:
            rows = f"rowid in (select rid from publish_live where h in {changed})"
        else:
            rows = f"hash({columns}) in {changed}"
        con.execute(f"insert into {target} select {columns} from {source} where {rows}")
        return "updated"
    finally:
        con.execute("drop table if exists publish_live")
        con.execute("drop table if exists publish_copied")
        con.execute("drop table if exists publish_changed")


Fingerprints = dict[str | None, tuple[int, int, int]]
"""Per value of ``GROUP_COLUMN`` (None for null): the rows, and the sum and exclusive or of
their hashes, of the rows of a relation that hold it."""


@dataclass
class Groups:
    """The fingerprints of every grouped relation: those the previous copy recorded, and
    those of the copy being written (``publish.relation_groups`` in the copy)."""

    previous: dict[tuple[str, str], Fingerprints]
    current: dict[tuple[str, str], Fingerprints]
    changed: dict[tuple[str, str], list[str | None]] = field(default_factory=dict)
    """The groups a relation's update replaced ([] when it was unchanged); a relation written
    whole, or updated row by row, is not in it."""
    built: dict[tuple[str, str], tuple[str, Fingerprints]] = field(default_factory=dict)
    """The fingerprints the build recorded of its incremental models (``BUILT_FINGERPRINTS``),
    with the columns they were taken over."""


def _group_fingerprints(
    con: duckdb.DuckDBPyConnection, relation: str, columns: str
) -> Fingerprints:
    group = _quote(GROUP_COLUMN)
    rows = con.execute(
        f"select {group}, count(*), sum(h), bit_xor(h) "
        f"from (select {group}, hash({columns}) as h from {relation}) group by {group}"
    ).fetchall()
    return {g: (int(n), int(total), int(xor)) for g, n, total, xor in rows}


BUILT_FINGERPRINTS = ("dbt_state", "group_fingerprints")
"""Where the build keeps the group fingerprints of its incremental models (macro
``record_group_fingerprints``): relation ('schema.name'), columns ('name type, ...', in
order), model_id, n_rows, hash_sum, hash_xor. Taken when a model writes its rows, for the
models it wrote, so that a publish after one more model does not hash every answer text."""


def _built_fingerprints(
    con: duckdb.DuckDBPyConnection, catalog: str
) -> dict[tuple[str, str], tuple[str, Fingerprints]]:
    """The group fingerprints the build recorded, per relation: (columns, fingerprints); a
    relation recorded over two lists of columns is left out."""
    schema, name = BUILT_FINGERPRINTS
    if not _has_table(con, catalog, schema, name):
        return {}
    rows = con.execute(
        "select relation, columns, model_id, n_rows, hash_sum, hash_xor "
        f"from {_quote(catalog)}.{_quote(schema)}.{_quote(name)}"
    ).fetchall()
    built: dict[tuple[str, str], tuple[str, Fingerprints]] = {}
    mixed = set()
    for relation, columns, group, n, total, xor in rows:
        key = _split(relation)
        recorded_columns, fingerprints = built.setdefault(key, (columns, {}))
        if recorded_columns != columns:
            mixed.add(key)
        fingerprints[group] = (int(n), int(total), int(xor))
    return {key: value for key, value in built.items() if key not in mixed}


def _built_groups(
    con: duckdb.DuckDBPyConnection,
    source: str,
    kept: list[tuple[str, str]],
    built: tuple[str, Fingerprints] | None,
) -> Fingerprints | None:
    """The fingerprints the build recorded of ``source``, when they were taken over the
    columns the copy holds and ``source`` still has the rows per group they count; else None
    (the publish hashes the relation itself)."""
    if built is None:
        return None
    columns, fingerprints = built
    if columns != ", ".join(f"{c} {t}" for c, t in kept):
        return None
    group = _quote(GROUP_COLUMN)
    held = dict(con.execute(f"select {group}, count(*) from {source} group by {group}").fetchall())
    if held != {g: n for g, (n, _, _) in fingerprints.items()}:
        return None
    return fingerprints


def _has_table(con: duckdb.DuckDBPyConnection, catalog: str, schema: str, name: str) -> bool:
    return bool(
        con.execute(
            "select count(*) from duckdb_tables() where database_name = ? and schema_name = ? "
            "and table_name = ?",
            [catalog, schema, name],
        ).fetchone()[0]
    )


GROUP_LOCAL_VIEWS = ("dbt_state", "group_local_views")
"""Where the build keeps the definition of each view whose rows of one ``GROUP_COLUMN`` value
come from the rows of that value alone in each input that has the column (macro
``record_group_local_view``): relation ('schema.name'), definition (its SQL as DuckDB keeps
it). A publish hashes such a view only for the groups whose rows changed in its inputs, not
whole: each of these views computes again, at every read, a row per generation or pair."""

# Functions whose value differs between two reads of the same rows: a view that calls one is
# hashed whole.
_VOLATILE_FUNCTIONS = frozenset(
    {
        "random",
        "setseed",
        "uuid",
        "gen_random_uuid",
        "uuidv4",
        "uuidv7",
        "nextval",
        "currval",
        "now",
        "today",
        "current_date",
        "current_time",
        "current_timestamp",
        "current_localtime",
        "current_localtimestamp",
        "get_current_time",
        "get_current_timestamp",
        "transaction_timestamp",
    }
)


def _view_definitions(con: duckdb.DuckDBPyConnection, catalog: str) -> dict[tuple[str, str], str]:
    """The SQL of every view of an attached database, as DuckDB keeps it."""
    rows = con.execute(
        "select schema_name, view_name, sql from duckdb_views() where database_name = ? "
        "and not internal",
        [catalog],
    ).fetchall()
    return {(schema, name): sql for schema, name, sql in rows}


def _group_local_views(
    con: duckdb.DuckDBPyConnection, catalog: str, definitions: dict[tuple[str, str], str]
) -> set[tuple[str, str]]:
    """The views the build declared group-local (``GROUP_LOCAL_VIEWS``) that still have the
    definition it recorded."""
    schema, name = GROUP_LOCAL_VIEWS
    if not _has_table(con, catalog, schema, name):
        return set()
    rows = con.execute(
        f"select relation, definition from {_quote(catalog)}.{_quote(schema)}.{_quote(name)}"
    ).fetchall()
    return {
        _split(relation)
        for relation, definition in rows
        if definitions.get(_split(relation)) == definition
    }


def _query_inputs(
    con: duckdb.DuckDBPyConnection, catalog: str, definition: str
) -> frozenset[tuple[str, str]] | None:
    """The relations (schema, name) a view's query reads, from DuckDB's own parse of it; None
    when that cannot be told: the query does not parse, reads a table function, names a
    relation without its schema that is none of its CTEs, names another database, or calls a
    function of ``_VOLATILE_FUNCTIONS`` or one defined in the database (a macro)."""
    query = re.match(r"(?is)\s*create\s+view\s+.+?\s+as\s+(.*)$", definition)
    if query is None:
        return None
    parsed = json.loads(con.execute("select json_serialize_sql(?)", [query[1]]).fetchone()[0])
    if parsed.get("error") or len(parsed.get("statements", ())) != 1:
        return None
    defined = {
        name
        for (name,) in con.execute(
            "select distinct function_name from duckdb_functions() where database_name = ? "
            "and not internal",
            [catalog],
        ).fetchall()
    }
    ctes: set[str] = set()
    tables: list[tuple[str, str, str]] = []
    unknown = False

    def walk(node: Any) -> None:
        nonlocal unknown
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        if node.get("type") == "TABLE_FUNCTION":
            unknown = True
        elif node.get("type") == "BASE_TABLE":
            tables.append((node.get("catalog_name", ""), node["schema_name"], node["table_name"]))
        elif node.get("class") == "FUNCTION":
            name = str(node.get("function_name", "")).lower()
            unknown = unknown or name in _VOLATILE_FUNCTIONS or name in defined
        for entry in node.get("cte_map", {}).get("map", ()):
            ctes.add(entry["key"])
        for value in node.values():
            walk(value)

    walk(parsed["statements"])
    if unknown:
        return None
    inputs = set()
    for database, schema, name in tables:
        if not schema:
            if name not in ctes:
                return None
        elif database in ("", catalog):
            inputs.add((schema, name))
        else:
            return None
    return frozenset(inputs)


def _recorded_definitions(
    con: duckdb.DuckDBPyConnection, catalog: str = _COPY
) -> dict[tuple[str, str], str]:
    """The view definitions a copy recorded (those its rows were computed with); none when it
    recorded none, or another DuckDB wrote them."""
    try:
        rows = con.execute(
            f"select schema_name, relation_name, definition from "
            f"{_manifest_table(DEFINITIONS_TABLE, catalog)} where duckdb_version = ?",
            [duckdb.__version__],
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    return {(schema, name): definition for schema, name, definition in rows}


Changes = dict[tuple[str, str], frozenset[str | None] | None]
"""Per relation this publish brought into the copy: the groups whose rows changed (empty when
none did; for a relation without ``GROUP_COLUMN``, empty or None), or None when that is not
known group by group (written whole, updated row by row, or with withheld columns)."""


def _change_of(relation: PublishedRelation, groups: Groups) -> frozenset[str | None] | None:
    key = (relation.schema, relation.name)
    if not relation.published or relation.withheld_columns:
        return None
    if relation.change == "unchanged":
        return frozenset()
    if relation.change == "updated" and key in groups.changed:
        return frozenset(groups.changed[key])
    return None


def _local_candidates(
    inputs: frozenset[tuple[str, str]] | None, changes: Changes
) -> frozenset[str | None] | None:
    """The groups whose rows may have changed in a group-local view: those whose rows changed
    in any of its inputs; None (every group) when an input is unknown, not brought into the
    copy (yet), or changed other than group by group."""
    if inputs is None:
        return None
    candidates: set[str | None] = set()
    for relation in inputs:
        changed = changes.get(relation)
        if changed is None:
            return None
        candidates |= changed
    return frozenset(candidates)


def _in_dependency_order(
    relations: list[tuple[str, str, str]],
    inputs: dict[tuple[str, str], frozenset[tuple[str, str]] | None],
) -> list[tuple[str, str, str]]:
    """``relations``, tables first, each view after the relations ``inputs`` says it reads."""
    by_key = {(schema, name): (schema, name, kind) for schema, name, kind in relations}
    order: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()

    def visit(key: tuple[str, str]) -> None:
        if key in seen or key not in by_key:
            return
        seen.add(key)
        for read in sorted(inputs.get(key) or ()):
            visit(read)
        order.append(by_key[key])

    for schema, name, _ in sorted(relations, key=lambda r: (r[2] != "table", r[0], r[1])):
        visit((schema, name))
    return order


def _changed_groups(now: Fingerprints, before: Fingerprints) -> list[str | None]:
    """The groups whose fingerprints differ between two records (new and gone ones too), in
    order, None last."""
    return sorted(
        (g for g in now.keys() | before.keys() if now.get(g) != before.get(g)),
        key=lambda g: (g is None, g or ""),
    )


def _in_groups(values: list[str | None]) -> str:
    """A filter on ``GROUP_COLUMN`` for these values, as literals."""
    group = _quote(GROUP_COLUMN)
    named = [v for v in values if v is not None]
    parts = [f"{group} in ({', '.join(_literal(v) for v in named)})"] if named else []
    if len(named) < len(values):
        parts.append(f"{group} is null")
    return " or ".join(parts)


MAX_GROUP_BRANCHES = 8
"""Up to this many groups are read again from a relation one query branch each."""


def _rows_of_groups(source: str, values: list[str | None], columns: str = "*") -> str:
    """A query of the rows of ``source`` in these groups (values of ``GROUP_COLUMN``), with the
    filter pushed down into a view's scans: each group is a branch of its own, with an equality,
    which DuckDB carries across a join's keys into the other side (a view that joins an
    aggregate by generation and model); an `in` list or an `or` it does not. More than
    ``MAX_GROUP_BRANCHES`` groups are read with one `in` list."""
    group = _quote(GROUP_COLUMN)
    named = [v for v in values if v is not None]
    if len(named) <= MAX_GROUP_BRANCHES:
        filters = [f"{group} = {_literal(v)}" for v in named]
    else:
        filters = [_in_groups(named)]
    if len(named) < len(values):
        filters.append(f"{group} is null")
    return " union all ".join(f"select {columns} from {source} where {f}" for f in filters)


def _update_groups(
    con: duckdb.DuckDBPyConnection,
    source: str,
    target: str,
    columns: str,
    previous: Fingerprints,
    live: Fingerprints | None = None,
    candidates: frozenset[str | None] | None = None,
) -> tuple[str, Fingerprints, list[str | None]] | None:
    """Make ``target`` hold the rows of ``source`` by replacing whole the groups (rows of one
    ``GROUP_COLUMN`` value) whose fingerprints differ from those the previous publish recorded;
    return what was done ('unchanged', 'updated' or 'rewrite', as ``_update_rows``), the
    fingerprints of ``source`` and the groups that differ.

    ``source`` is read and hashed once; of ``target`` only the group column is read, to check
    that it still holds the rows its record says (None when it does not: the row by row
    update then takes over). The rows of the changed groups are read from ``source`` again,
    with the filter pushed down into a view. With ``candidates`` (the only groups whose rows
    may have changed: ``_local_candidates``), only those groups are hashed; the others keep
    the fingerprints the previous publish recorded.
    """
    group = _quote(GROUP_COLUMN)
    held = dict(con.execute(f"select {group}, count(*) from {target} group by {group}").fetchall())
    if held != {g: n for g, (n, _, _) in previous.items()}:
        return None
    if live is None and candidates is not None:
        live = {g: fp for g, fp in previous.items() if g not in candidates}
        if candidates:
            hashed = _rows_of_groups(source, sorted(candidates, key=lambda g: (g is None, g or "")))
            live.update(_group_fingerprints(con, f"({hashed})", columns))
    elif live is None:
        live = _group_fingerprints(con, source, columns)
    changed = _changed_groups(live, previous)
    if not changed:
        return "unchanged", live, []
    gone = sum(previous[g][0] for g in changed if g in previous)
    if gone > REWRITE_CHANGED_SHARE * sum(n for n, _, _ in previous.values()):
        return "rewrite", live, changed
    con.execute(f"delete from {target} where {_in_groups(changed)}")
    con.execute(f"insert into {target} {_rows_of_groups(source, changed, columns)}")
    return "updated", live, changed


def _copy_relation(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    schema: str,
    name: str,
    kind: str,
    version: str,
    in_copy: dict[tuple[str, str], list[tuple[str, str]]],
    groups: Groups,
    candidates: frozenset[str | None] | None = None,
) -> PublishedRelation:
    """Bring one relation into the copy as a plain table, less its withheld columns.

    ``in_copy`` holds the columns of the tables the copy already has (the previous
    publish's): a table with the same columns is updated, or left as it is. A relation with a
    ``GROUP_COLUMN`` of text is updated group by group when the previous copy recorded its
    groups' fingerprints (``groups.previous``), else row by row; the fingerprints of its
    groups in the copy go into ``groups.current``. ``candidates``: the only groups whose
    rows may have changed, when that is known (``_update_groups``).
    """
    source = f"{_quote(catalog)}.{_quote(schema)}.{_quote(name)}"
    if kind == "view":
        try:
            con.execute(f"select * from {source} limit 0")
        except duckdb.Error as err:
            note = f"the view cannot be read without the project's code or a missing upstream relation: {err}"
            log.warning("left out of the published copy: %s.%s (%s)", schema, name, note)
            return PublishedRelation(schema, name, kind, False, None, (), note)
    columns = _columns(con, catalog, schema, name)
    withheld = tuple(c for c, _ in columns if c in WITHHELD_COLUMNS)
    kept = [(c, t) for c, t in columns if c not in WITHHELD_COLUMNS]
    if not kept:
        note = f"every column is a withheld config column ({', '.join(withheld)})"
        return PublishedRelation(schema, name, kind, False, None, withheld, note)
    target = f"{_COPY}.{_quote(schema)}.{_quote(name)}"
    listed = ", ".join(_quote(c) for c, _ in kept)
    grouped = (GROUP_COLUMN, "VARCHAR") in kept
    try:
        built = (
            _built_groups(con, source, kept, groups.built.get((schema, name))) if grouped else None
        )
        change, fingerprints = "written", None
        if in_copy.get((schema, name)) == kept:
            previous = groups.previous.get((schema, name)) if grouped else None
            by_group = (
                _update_groups(con, source, target, listed, previous, built, candidates)
                if previous is not None
                else None
            )
            if by_group is None:
                change = _update_rows(con, source, target, listed, kind == "table")
            else:
                change, fingerprints, groups.changed[(schema, name)] = by_group
        if change in ("written", "rewrite"):
            groups.changed.pop((schema, name), None)
            con.execute(f"create schema if not exists {_COPY}.{_quote(schema)}")
            con.execute(f"drop table if exists {target}")
            con.execute(f"create table {target} as select {listed} from {source}")
            change, fingerprints = "written", None
        if grouped:
            groups.current[(schema, name)] = (
                fingerprints or built or _group_fingerprints(con, target, listed)
            )
    except duckdb.Error as err:
        raise RuntimeError(
            f"cannot write {schema}.{name} into a copy in storage version {version} ({err}); publish with a "
            f"newer --storage-version (or ${STORAGE_VERSION_ENV}), which fewer DuckDB 1.x clients read"
        ) from None
    (n_rows,) = con.execute(f"select count(*) from {target}").fetchone()
    note = f"withheld: {', '.join(withheld)} (a stored config)" if withheld else None
    return PublishedRelation(schema, name, kind, True, int(n_rows), withheld, note, change)


def _manifest_table(name: str, catalog: str = _COPY) -> str:
    """A table of the copy's manifest schema (``publish.<name>``)."""
    return f"{catalog}.{_quote(MANIFEST_SCHEMA)}.{_quote(name)}"


def _recorded_groups(
    con: duckdb.DuckDBPyConnection, catalog: str = _COPY
) -> dict[tuple[str, str], Fingerprints]:
    """The fingerprints of the groups a copy recorded; none when it recorded none, or when
    another DuckDB wrote them (its ``hash`` may differ)."""
    try:
        rows = con.execute(
            f"select schema_name, relation_name, group_value, n_rows, hash_sum, hash_xor "
            f"from {_manifest_table(GROUPS_TABLE, catalog)} where group_column = ? and duckdb_version = ?",
            [GROUP_COLUMN, duckdb.__version__],
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    recorded: dict[tuple[str, str], Fingerprints] = {}
    for schema, name, value, n, total, xor in rows:
        recorded.setdefault((schema, name), {})[value] = (int(n), int(total), int(xor))
    return recorded


def _write_manifest(
    con: duckdb.DuckDBPyConnection,
    rows: list[PublishedRelation],
    version: str,
    groups: dict[tuple[str, str], Fingerprints],
    definitions: dict[tuple[str, str], str],
) -> None:
    table = _manifest_table(MANIFEST_TABLE)
    con.execute(f"drop schema if exists {_COPY}.{_quote(MANIFEST_SCHEMA)} cascade")
    con.execute(f"create schema {_COPY}.{_quote(MANIFEST_SCHEMA)}")
    con.execute(
        f"""
        create table {table} (
            schema_name varchar not null,
            relation_name varchar not null,
            kind_in_warehouse varchar not null,
            published boolean not null,
            n_rows bigint,
            withheld_columns varchar,
            note varchar,
            storage_version varchar not null,
            published_at timestamp not null,
            change varchar
        )
        """
    )
    now = datetime.now(UTC).replace(tzinfo=None)
    _insert(
        con,
        table,
        [
            {
                "schema_name": r.schema,
                "relation_name": r.name,
                "kind_in_warehouse": r.kind,
                "published": r.published,
                "n_rows": r.n_rows,
                "withheld_columns": ", ".join(r.withheld_columns) or None,
                "note": r.note,
                "storage_version": version,
                "published_at": now,
                "change": r.change,
            }
            for r in rows
        ],
    )
    con.execute(
        f"""
        create table {_manifest_table(GROUPS_TABLE)} (
            schema_name varchar not null,
            relation_name varchar not null,
            group_column varchar not null,
            group_value varchar,
            n_rows bigint not null,
            hash_sum hugeint not null,
            hash_xor ubigint not null,
            duckdb_version varchar not null
        )
        """
    )
    _insert(
        con,
        _manifest_table(GROUPS_TABLE),
        [
            {
                "schema_name": schema,
                "relation_name": name,
                "group_column": GROUP_COLUMN,
                "group_value": value,
                "n_rows": n,
                "hash_sum": Decimal(total),
                "hash_xor": xor,
                "duckdb_version": duckdb.__version__,
            }
            for (schema, name), prints in sorted(groups.items())
            for value, (n, total, xor) in prints.items()
        ],
        # a sum of 64-bit hashes needs 128 bits, which Arrow holds only as a decimal
        _GROUP_ROW,
    )
    # the definition of each view published, which its rows in this copy (and the fingerprints
    # of its groups) were computed with
    con.execute(
        f"""
        create table {_manifest_table(DEFINITIONS_TABLE)} (
            schema_name varchar not null,
            relation_name varchar not null,
            definition varchar not null,
            duckdb_version varchar not null
        )
        """
    )
    published = {(r.schema, r.name) for r in rows if r.published}
    _insert(
        con,
        _manifest_table(DEFINITIONS_TABLE),
        [
            {
                "schema_name": schema,
                "relation_name": name,
                "definition": definition,
                "duckdb_version": duckdb.__version__,
            }
            for (schema, name), definition in sorted(definitions.items())
            if (schema, name) in published
        ],
    )


_GROUP_ROW = pa.schema(
    [
        ("schema_name", pa.string()),
        ("relation_name", pa.string()),
        ("group_column", pa.string()),
        ("group_value", pa.string()),
        ("n_rows", pa.int64()),
        ("hash_sum", pa.decimal128(38, 0)),
        ("hash_xor", pa.uint64()),
        ("duckdb_version", pa.string()),
    ]
)


def _insert(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: list[dict[str, Any]],
    schema: pa.Schema | None = None,
) -> None:
    """Insert ``rows`` (by column name) with one statement, as one Arrow table: an
    ``executemany`` of a thousand group fingerprints took over a second."""
    if not rows:
        return
    con.register("publish_manifest_rows", pa.Table.from_pylist(rows, schema=schema))
    try:
        con.execute(f"insert into {table} by name select * from publish_manifest_rows")
    finally:
        con.unregister("publish_manifest_rows")


FRESH_COPY_FREE_SHARE = 0.5
"""A publish writes a fresh copy, rather than updating the previous one, when more than this
share of the previous copy's blocks is free (space left by rows deleted in earlier updates)."""


def _attach_for_update(con: duckdb.DuckDBPyConnection, tmp: Path, version: str) -> str | None:
    """Attach ``tmp``, a former copy, to be updated; return why it cannot be (then it is left
    detached), or None."""
    manifest = _manifest_table(MANIFEST_TABLE)
    try:
        con.execute(f"attach {_literal(str(tmp))} as {_COPY}")
        versions = {
            v for (v,) in con.execute(f"select distinct storage_version from {manifest}").fetchall()
        }
        used, free = con.execute(
            "select used_blocks, free_blocks from pragma_database_size() where database_name = ?",
            [_COPY],
        ).fetchone()
        reason = None
        if versions != {version}:
            reason = f"it is in storage version {', '.join(sorted(versions)) or 'unknown'}, not {version}"
        elif free > FRESH_COPY_FREE_SHARE * (used + free):
            reason = f"{free} of its {used + free} blocks are free"
    except duckdb.Error as err:
        reason = f"it cannot be read and written ({err})"
    if reason is not None:
        try:
            con.execute(f"detach {_COPY}")
        except duckdb.Error:
            pass
    return reason


def _start_from_previous(
    con: duckdb.DuckDBPyConnection, previous: Path, standby: Path, tmp: Path, version: str
) -> str | None:
    """Attach under ``tmp`` a former copy to update, when there is one that can be; return
    which: 'standby' or 'previous', else None (``tmp`` is then left absent, for a fresh copy).

    The standby, the copy the previous publish replaced, is moved to ``tmp``: updating it
    writes what changed in the last two builds, where a copy of the previous copy would first
    write the whole file again (2.4 GB at a million generations). It is not used when it is
    the previous copy itself (a publish killed between its two moves), nor when a reader still
    has it open (DuckDB's lock refuses the writer); a copy of ``previous`` is made then. Either
    is not updated when it is in another storage version, when it cannot be read, or when more
    than ``FRESH_COPY_FREE_SHARE`` of it is free space.
    """
    if standby.is_file():
        if previous.is_file() and os.path.samefile(standby, previous):
            standby.unlink()
        else:
            os.replace(standby, tmp)
            reason = _attach_for_update(con, tmp, version)
            if reason is None:
                return "standby"
            log.info("copying %s rather than updating the copy before it: %s", previous, reason)
            _remove_copy(tmp)
    if not previous.is_file():
        return None
    shutil.copyfile(previous, tmp)
    reason = _attach_for_update(con, tmp, version)
    if reason is None:
        return "previous"
    log.info("writing a fresh copy rather than updating %s: %s", previous, reason)
    _remove_copy(tmp)
    return None


def _remove_copy(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".wal").unlink(missing_ok=True)


def _keep_standby(previous: Path, standby: Path) -> None:
    """Keep the copy about to be replaced as the standby that the next publish updates (a hard
    link: the file stays where readers that opened it read it). Where the file system has no
    hard links, there is no standby and the next publish copies the copy."""
    standby.unlink(missing_ok=True)
    if not previous.is_file():
        return
    try:
        os.link(previous, standby)
    except OSError as err:
        log.info("no standby copy kept beside %s: %s", previous, err)


@dataclass
class InPlace:
    """What the files in place were written from, as the Parquet files go: the record of the
    publish that left them (the previous copy's)."""

    files: dict[str, FileStamp]
    """The Parquet files it recorded, by file name."""
    unchanged: set[tuple[str, str]]
    """The relations whose rows the new copy holds as it did."""
    changed: dict[tuple[str, str], list[str | None]]
    """Of the relations compared model by model, the models whose rows differ from it."""


def _in_place_since_standby(
    con: duckdb.DuckDBPyConnection,
    previous: Path,
    current: dict[tuple[str, str], Fingerprints],
    relations: list[tuple[str, str]],
) -> InPlace:
    """``InPlace`` for a copy updated from the standby: compared with the previous copy, which
    the Parquet files in place were written from (the standby is one build older). A relation
    with recorded groups is compared by their fingerprints; another (a small mart) by the
    fingerprint of its rows in both copies. Nothing is unchanged when the previous copy cannot
    be read."""
    placed = "published_in_place"
    try:
        con.execute(f"attach {_literal(str(previous))} as {placed} (read_only)")
    except duckdb.Error as err:
        log.info("writing every Parquet file again: %s cannot be read (%s)", previous, err)
        return InPlace({}, set(), {})
    try:
        recorded = _recorded_groups(con, placed)
        unchanged: set[tuple[str, str]] = set()
        changed: dict[tuple[str, str], list[str | None]] = {}
        for schema, name in relations:
            now, before = current.get((schema, name)), recorded.get((schema, name))
            if now is not None and before is not None:
                changed[(schema, name)] = _changed_groups(now, before)
                if not changed[(schema, name)]:
                    unchanged.add((schema, name))
                continue
            columns = _columns(con, _COPY, schema, name)
            if not columns or _columns(con, placed, schema, name) != columns:
                continue
            listed = ", ".join(_quote(c) for c, _ in columns)
            rows = "select {} from {}.{}.{}"
            if fingerprint(con, rows.format(listed, _COPY, _quote(schema), _quote(name))) == (
                fingerprint(con, rows.format(listed, placed, _quote(schema), _quote(name)))
            ):
                unchanged.add((schema, name))
        return InPlace(_recorded_files(con, placed), unchanged, changed)
    finally:
        con.execute(f"detach {placed}")


FileStamp = tuple[int, int, int]
"""A file's size, modification time (ns) and inode: what a publish records of each Parquet
file it leaves in place, and what tells the next one that the file is still that one."""


def _file_stamp(path: Path) -> FileStamp | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _recorded_files(con: duckdb.DuckDBPyConnection, catalog: str = _COPY) -> dict[str, FileStamp]:
    """The Parquet files a copy recorded, by file name; none when it recorded none."""
    try:
        rows = con.execute(
            f"select file_name, n_bytes, modified_ns, inode from {_manifest_table(FILES_TABLE, catalog)}"
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    return {name: (int(n), int(mtime), int(inode)) for name, n, mtime, inode in rows}


def _write_files(
    con: duckdb.DuckDBPyConnection, files: list[tuple[str, str, str, FileStamp]]
) -> None:
    """``publish.parquet_files``: each Parquet file of the copy (schema, relation, file name)
    with its stamp as it will lie in place (a move keeps a file's size, modification time
    and inode)."""
    con.execute(
        f"""
        create table {_manifest_table(FILES_TABLE)} (
            schema_name varchar not null,
            relation_name varchar not null,
            file_name varchar not null,
            n_bytes bigint not null,
            modified_ns bigint not null,
            inode ubigint not null
        )
        """
    )
    rows = [
        {
            "schema_name": schema,
            "relation_name": name,
            "file_name": file_name,
            "n_bytes": size,
            "modified_ns": mtime,
            "inode": inode,
        }
        for schema, name, file_name, (size, mtime, inode) in files
    ]
    _insert(con, _manifest_table(FILES_TABLE), rows)


PARQUET_BY_MODEL: frozenset[str] = frozenset({"pair_details"})
"""Marts exported as a folder of Parquet files, one per value of ``GROUP_COLUMN`` (a text
column; ``parquet/pair_details/<model>.<digest>.parquet``), not as one file: the marts that hold
answer texts, whose file took most of a publish's time at a million generations. A publish
then writes the files of the models that changed, and keeps the others."""


def model_file_name(value: str | None) -> str:
    """The file of a ``PARQUET_BY_MODEL`` mart that holds the rows of one model: a readable
    part of its id and a digest of all of it, so that any id (a path, a URL) gives a short,
    safe and distinct name."""
    if value is None:
        return "null.parquet"
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip(".-")[:60] or "model"
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:12]
    return f"{readable}.{digest}.parquet"


def _write_parquet(
    con: duckdb.DuckDBPyConnection,
    select: str,
    part: Path,
    written: list[tuple[Path, Path]],
    final: Path,
) -> FileStamp:
    """Write the rows of ``select`` to ``part``, to be moved to ``final`` once the copy is in
    place (``written``); return the file's stamp."""
    written.append((part, final))
    con.execute(f"copy ({select}) to {_literal(str(part))} (format parquet)")
    stamp = _file_stamp(part)
    if stamp is None:
        raise RuntimeError(f"the Parquet file {part} vanished while it was being written")
    return stamp


def _model_files(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    name: str,
    parquet_dir: Path,
    changed: list[str | None] | None,
    recorded: dict[str, FileStamp],
    written: list[tuple[Path, Path]],
    removed: list[Path],
) -> list[tuple[str, str, str, FileStamp]]:
    """Write the files of a ``PARQUET_BY_MODEL`` mart that need it; return every file of the
    mart with its stamp, as ``publish.parquet_files`` records it (``<mart>/<file>``).

    A model's file is kept when the mart was compared model by model (``changed``: the models
    whose rows differ), the model is not among those, and the folder holds exactly the files
    the previous publish recorded; otherwise every model's file is written again. Files of models the mart no longer holds, and the single file an
    older publish wrote (``<mart>.parquet``), go into ``removed``; new files into ``written``
    (temporary name, final name), both acted on once the copy is in place.
    """
    stem = _parquet_stem(schema, name)
    folder = parquet_dir / stem
    folder.mkdir(exist_ok=True)
    prefix = f"{stem}/"
    on_disk = {f"{prefix}{p.name}": _file_stamp(p) for p in folder.glob("*.parquet")}
    on_record = {f: st for f, st in recorded.items() if f.startswith(prefix)}
    intact = changed is not None and on_disk == on_record
    redo = set(changed or ())
    select = _parquet_select(con, schema, name)
    group = _quote(GROUP_COLUMN)
    values = [v for (v,) in con.execute(f"select distinct {group} from ({select})").fetchall()]
    files, pid = [], os.getpid()
    for value in values:
        file_name = prefix + model_file_name(value)
        if intact and value not in redo and file_name in on_disk:
            files.append((schema, name, file_name, on_disk[file_name]))
            continue
        final = parquet_dir / file_name
        part = folder / f".{final.stem}.{pid}.tmp.parquet"
        where = f"{group} is null" if value is None else f"{group} = {_literal(value)}"
        stamp = _write_parquet(con, f"{select} where {where}", part, written, final)
        files.append((schema, name, file_name, stamp))
    kept = {f for _, _, f, _ in files}
    removed += [parquet_dir / f for f in on_disk if f not in kept]
    removed.append(parquet_dir / f"{stem}.parquet")
    return files


def parquet_folder(published: str | os.PathLike) -> Path:
    """The folder of the Parquet files that go with the published copy ``published``."""
    copy = Path(published)
    return copy.parent / copy.stem / "parquet"


def parquet_glob(published: str | os.PathLike, relation: str) -> str:
    """What ``read_parquet`` reads for one exported relation ("schema.name", or "name" for
    the main schema) of the copy ``published``: its file, or the files of its folder for a
    mart of ``PARQUET_BY_MODEL``."""
    stem = _parquet_stem(*_split(relation))
    folder = parquet_folder(published)
    if (folder / stem).is_dir():
        return str(folder / stem / "*.parquet")
    return str(folder / f"{stem}.parquet")


def publish(
    warehouse: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    storage_version: str | None = None,
) -> Path:
    """Write the BI copy and the Parquet files; return the copy's path.

    ``storage_version`` (else $ABLEAUDIT_PUBLISH_STORAGE_VERSION, else
    ``DEFAULT_STORAGE_VERSION``) is the DuckDB storage format of the copy: a
    DuckDB client of that version or newer opens it.
    """
    src = warehouse_path(warehouse)
    if not src.is_file():
        raise FileNotFoundError(f"no warehouse at {src}; run `ableaudit build` first")
    version = resolve_storage_version(storage_version)
    out = Path(out_dir).expanduser().resolve() if out_dir else src.parent / "published"
    catalog = src.stem
    parquet_dir = parquet_folder(out / src.name)
    parquet_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out, parquet_dir, *(parquet_dir / m for m in PARQUET_BY_MODEL))
    target = out / src.name
    standby = out / f".{catalog}.standby.duckdb"
    pid = os.getpid()
    tmp = out / f".{catalog}.{pid}.tmp.duckdb"
    tmp_wal = tmp.with_name(tmp.name + ".wal")
    for leftover in (tmp, tmp_wal):
        leftover.unlink(missing_ok=True)
    written: list[tuple[Path, Path]] = []
    removed: list[Path] = []  # files of a by-model mart that the new copy no longer holds
    con = duckdb.connect(":memory:")
    # under a memory limit, what does not fit spills here, not into the current folder
    spill = tempfile.mkdtemp(prefix="ableaudit-publish-")
    try:
        con.execute(f"set temp_directory = {_literal(spill)}")
        con.execute("set enable_progress_bar = false")
        apply_memory_limit(con)
        try:
            con.execute(f"attach {_literal(str(src))} as {_quote(catalog)} (read_only)")
        except duckdb.Error as err:
            raise RuntimeError(
                f"cannot read the warehouse {src} to publish it ({err}); close the process "
                "writing it (a dbt run, an audit) and run `ableaudit publish` again"
            ) from None
        relations = _relations(con, catalog)
        kinds = {(schema, name): kind for schema, name, kind in relations}
        missing = [m for m in mart_names() if kinds.get(("main", m)) != "table"]
        if missing:
            raise RuntimeError(
                f"marts {missing} are not tables in {src}; run `ableaudit build` before publishing"
            )
        extra = [_split(r) for r in EXTRA_RELATIONS]
        absent = [f"{s}.{n}" for s, n in extra if (s, n) not in kinds]
        if absent:
            raise RuntimeError(
                f"relations {absent} to export are not in {src}; run `ableaudit build` before publishing"
            )
        own = [
            f"{MANIFEST_SCHEMA}.{t}"
            for t in (MANIFEST_TABLE, GROUPS_TABLE, FILES_TABLE, DEFINITIONS_TABLE)
            if (MANIFEST_SCHEMA, t) in kinds
        ]
        if own:
            raise RuntimeError(
                f"{src} has its own {' and '.join(own)}, a name the copy's manifest takes"
            )
        try:
            updating = _start_from_previous(con, target, standby, tmp, version)
            if updating is None:
                con.execute(
                    f"attach {_literal(str(tmp))} as {_COPY} (storage_version {_literal(version)})"
                )
        except duckdb.Error as err:
            if "version" not in str(err).lower():
                raise RuntimeError(f"cannot write the published copy {tmp} ({err})") from None
            raise ValueError(
                f"storage version {version!r} is not one DuckDB {duckdb.__version__} can write; set "
                f"--storage-version or ${STORAGE_VERSION_ENV} to a DuckDB release such as "
                f"{DEFAULT_STORAGE_VERSION} (the default, read by DuckDB 1.1 and newer) or v1.4.0"
            ) from None
        in_copy: dict[tuple[str, str], list[tuple[str, str]]] = {}
        groups = Groups(
            _recorded_groups(con) if updating else {}, {}, built=_built_fingerprints(con, catalog)
        )
        # the copy's own record is that of the files in place only when it is the previous copy
        recorded_files = _recorded_files(con) if updating == "previous" else {}
        if updating:
            for schema, name, _ in _relations(con, _COPY):
                if schema != MANIFEST_SCHEMA:
                    in_copy[(schema, name)] = _columns(con, _COPY, schema, name)
        # a view that declared its groups local is brought in after its inputs, and hashed only
        # for the groups whose rows changed in them, while its definition is the one the
        # previous copy's fingerprints were taken with
        definitions = _view_definitions(con, catalog)
        previous_definitions = _recorded_definitions(con) if updating else {}
        inputs = {
            key: _query_inputs(con, catalog, definitions[key])
            for key in _group_local_views(con, catalog, definitions)
            if previous_definitions.get(key) == definitions[key]
        }
        changes: Changes = {}
        copied: dict[tuple[str, str], PublishedRelation] = {}
        for s, n, k in _in_dependency_order(relations, inputs):
            candidates = _local_candidates(inputs[(s, n)], changes) if (s, n) in inputs else None
            copied[(s, n)] = _copy_relation(
                con, catalog, s, n, k, version, in_copy, groups, candidates
            )
            changes[(s, n)] = _change_of(copied[(s, n)], groups)
        manifest = [copied[(s, n)] for s, n, _ in relations]
        published = {(r.schema, r.name): r for r in manifest if r.published}
        gone = in_copy.keys() - published.keys()  # from the warehouse, or now left out
        for schema, name in gone:
            con.execute(f"drop table {_COPY}.{_quote(schema)}.{_quote(name)}")
        _write_manifest(con, manifest, version, groups.current, definitions)
        exported = [("main", m) for m in mart_names()] + extra
        for schema, name in exported:
            if (schema, name) not in published:
                raise RuntimeError(f"{schema}.{name} could not be published; see the warning above")
        if updating == "standby":
            in_place = _in_place_since_standby(con, target, groups.current, exported)
        else:
            in_place = InPlace(
                recorded_files,
                {key for key, r in published.items() if r.change == "unchanged"},
                groups.changed,
            )
        files = []
        for schema, name in exported:
            stem = _parquet_stem(schema, name)
            final = parquet_dir / f"{stem}.parquet"
            if stem in PARQUET_BY_MODEL and (GROUP_COLUMN, "VARCHAR") in _columns(
                con, _COPY, schema, name
            ):
                files += _model_files(
                    con,
                    schema,
                    name,
                    parquet_dir,
                    in_place.changed.get((schema, name)),
                    in_place.files,
                    written,
                    removed,
                )
                continue
            # kept when the mart is unchanged and the file is the one the last publish left
            # (one killed between its moves leaves an older file beside a current copy)
            recorded = in_place.files.get(final.name)
            if (
                (schema, name) in in_place.unchanged
                and recorded is not None
                and _file_stamp(final) == recorded
            ):
                files.append((schema, name, final.name, recorded))
                continue
            part = parquet_dir / f".{stem}.{pid}.tmp.parquet"
            select = _parquet_select(con, schema, name)
            files.append(
                (schema, name, final.name, _write_parquet(con, select, part, written, final))
            )
        _write_files(con, files)
        con.execute(f"detach {_COPY}")
    except BaseException:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
        for leftover in (tmp, tmp_wal, *(part for part, _ in written)):
            leftover.unlink(missing_ok=True)
        raise
    con.close()
    shutil.rmtree(spill, ignore_errors=True)
    _keep_standby(target, standby)
    os.replace(tmp, target)
    for part, final in written:
        os.replace(part, final)
    for path in removed:
        path.unlink(missing_ok=True)
    return target
