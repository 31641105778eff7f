"""View analysis: which views a publish may update model by model, from their definitions and the relations they read."""

from __future__ import annotations

import json
import re
from typing import Any

import duckdb

from ableaudit.warehouse.publishing.catalog import (
    COPY,
    DEFINITIONS_TABLE,
    PublishedRelation,
    has_table,
    manifest_table,
    quote,
    split_relation,
)
from ableaudit.warehouse.publishing.fingerprints import Groups

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


def view_definitions(con: duckdb.DuckDBPyConnection, catalog: str) -> dict[tuple[str, str], str]:
    """The SQL of every view of an attached database, as DuckDB keeps it."""
    rows = con.execute(
        "select schema_name, view_name, sql from duckdb_views() where database_name = ? "
        "and not internal",
        [catalog],
    ).fetchall()
    return {(schema, name): sql for schema, name, sql in rows}


def group_local_views(
    con: duckdb.DuckDBPyConnection, catalog: str, definitions: dict[tuple[str, str], str]
) -> set[tuple[str, str]]:
    """The views the build declared group-local (``GROUP_LOCAL_VIEWS``) that still have the
    definition it recorded."""
    schema, name = GROUP_LOCAL_VIEWS
    if not has_table(con, catalog, schema, name):
        return set()
    rows = con.execute(
        f"select relation, definition from {quote(catalog)}.{quote(schema)}.{quote(name)}"
    ).fetchall()
    return {
        split_relation(relation)
        for relation, definition in rows
        if definitions.get(split_relation(relation)) == definition
    }


def query_inputs(
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


def recorded_definitions(
    con: duckdb.DuckDBPyConnection, catalog: str = COPY
) -> dict[tuple[str, str], str]:
    """The view definitions a copy recorded (those its rows were computed with); none when it
    recorded none, or another DuckDB wrote them."""
    try:
        rows = con.execute(
            f"select schema_name, relation_name, definition from "
            f"{manifest_table(DEFINITIONS_TABLE, catalog)} where duckdb_version = ?",
            [duckdb.__version__],
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    return {(schema, name): definition for schema, name, definition in rows}


Changes = dict[tuple[str, str], frozenset[str | None] | None]
"""Per relation this publish brought into the copy: the groups whose rows changed (empty when
none did; for a relation without ``GROUP_COLUMN``, empty or None), or None when that is not
known group by group (written whole, updated row by row, or with withheld columns)."""


def change_of(relation: PublishedRelation, groups: Groups) -> frozenset[str | None] | None:
    key = (relation.schema, relation.name)
    if not relation.published or relation.withheld_columns:
        return None
    if relation.change == "unchanged":
        return frozenset()
    if relation.change == "updated" and key in groups.changed:
        return frozenset(groups.changed[key])
    return None


def local_candidates(
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


def in_dependency_order(
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
