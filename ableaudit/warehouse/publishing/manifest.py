"""The copy's manifest: ``publish.relations`` (what the copy holds and left out), the per-model fingerprints and the view definitions."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import duckdb
import pyarrow as pa

from ableaudit.warehouse.publishing.catalog import (
    COPY,
    DEFINITIONS_TABLE,
    GROUP_COLUMN,
    GROUPS_TABLE,
    MANIFEST_SCHEMA,
    MANIFEST_TABLE,
    PublishedRelation,
    insert_rows,
    manifest_table,
    quote,
)
from ableaudit.warehouse.publishing.fingerprints import Fingerprints


def write_manifest(
    con: duckdb.DuckDBPyConnection,
    rows: list[PublishedRelation],
    version: str,
    groups: dict[tuple[str, str], Fingerprints],
    definitions: dict[tuple[str, str], str],
) -> None:
    table = manifest_table(MANIFEST_TABLE)
    con.execute(f"drop schema if exists {COPY}.{quote(MANIFEST_SCHEMA)} cascade")
    con.execute(f"create schema {COPY}.{quote(MANIFEST_SCHEMA)}")
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
    insert_rows(
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
        create table {manifest_table(GROUPS_TABLE)} (
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
    insert_rows(
        con,
        manifest_table(GROUPS_TABLE),
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
        create table {manifest_table(DEFINITIONS_TABLE)} (
            schema_name varchar not null,
            relation_name varchar not null,
            definition varchar not null,
            duckdb_version varchar not null
        )
        """
    )
    published = {(r.schema, r.name) for r in rows if r.published}
    insert_rows(
        con,
        manifest_table(DEFINITIONS_TABLE),
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
