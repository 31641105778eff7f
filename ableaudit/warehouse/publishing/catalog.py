"""What every step of a publish shares: the copy's catalog name, its manifest tables, the relations to publish and their columns, and quoting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

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
UNPUBLISHED_SCHEMAS = ("information_schema", "pg_catalog", "dbt_state")


COPY = "published_copy"


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


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def list_relations(con: duckdb.DuckDBPyConnection, catalog: str) -> list[tuple[str, str, str]]:
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
        {"catalog": catalog, "unpublished": list(UNPUBLISHED_SCHEMAS)},
    ).fetchall()


def split_relation(relation: str) -> tuple[str, str]:
    schema, _, name = relation.rpartition(".")
    return schema or "main", name


def relation_columns(
    con: duckdb.DuckDBPyConnection, catalog: str, schema: str, name: str
) -> list[tuple[str, str]]:
    """(name, type) of each column of a relation of an attached database, in order."""
    return con.execute(
        "select column_name, data_type from duckdb_columns() where database_name = ? and schema_name = ? "
        "and table_name = ? order by column_index",
        [catalog, schema, name],
    ).fetchall()


def has_table(con: duckdb.DuckDBPyConnection, catalog: str, schema: str, name: str) -> bool:
    return bool(
        con.execute(
            "select count(*) from duckdb_tables() where database_name = ? and schema_name = ? "
            "and table_name = ?",
            [catalog, schema, name],
        ).fetchone()[0]
    )


def manifest_table(name: str, catalog: str = COPY) -> str:
    """A table of the copy's manifest schema (``publish.<name>``)."""
    return f"{catalog}.{quote(MANIFEST_SCHEMA)}.{quote(name)}"


def insert_rows(
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
