"""Fingerprints of a relation's rows, whole and per model: what the build recorded, what the copy recorded, and which models changed."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from ableaudit.warehouse.publishing.catalog import (
    COPY,
    GROUP_COLUMN,
    GROUPS_TABLE,
    has_table,
    manifest_table,
    quote,
    split_relation,
)


def fingerprint(con: duckdb.DuckDBPyConnection, select: str) -> tuple[int, int, int]:
    """Rows, and the sum and exclusive or of their hashes, of a query: equal for the same
    multiset of rows, in one streaming pass (no sort, no hash table)."""
    count, total, xor = con.execute(
        f"select count(*), coalesce(sum(h), 0), coalesce(bit_xor(h), 0) "
        f"from (select hash(*columns(*)) as h from ({select}))"
    ).fetchone()
    return int(count), int(total), int(xor)


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


def group_fingerprints(con: duckdb.DuckDBPyConnection, relation: str, columns: str) -> Fingerprints:
    group = quote(GROUP_COLUMN)
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


def built_fingerprints(
    con: duckdb.DuckDBPyConnection, catalog: str
) -> dict[tuple[str, str], tuple[str, Fingerprints]]:
    """The group fingerprints the build recorded, per relation: (columns, fingerprints); a
    relation recorded over two lists of columns is left out."""
    schema, name = BUILT_FINGERPRINTS
    if not has_table(con, catalog, schema, name):
        return {}
    rows = con.execute(
        "select relation, columns, model_id, n_rows, hash_sum, hash_xor "
        f"from {quote(catalog)}.{quote(schema)}.{quote(name)}"
    ).fetchall()
    built: dict[tuple[str, str], tuple[str, Fingerprints]] = {}
    mixed = set()
    for relation, columns, group, n, total, xor in rows:
        key = split_relation(relation)
        recorded_columns, fingerprints = built.setdefault(key, (columns, {}))
        if recorded_columns != columns:
            mixed.add(key)
        fingerprints[group] = (int(n), int(total), int(xor))
    return {key: value for key, value in built.items() if key not in mixed}


def built_groups(
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
    group = quote(GROUP_COLUMN)
    held = dict(con.execute(f"select {group}, count(*) from {source} group by {group}").fetchall())
    if held != {g: n for g, (n, _, _) in fingerprints.items()}:
        return None
    return fingerprints


def changed_groups(now: Fingerprints, before: Fingerprints) -> list[str | None]:
    """The groups whose fingerprints differ between two records (new and gone ones too), in
    order, None last."""
    return sorted(
        (g for g in now.keys() | before.keys() if now.get(g) != before.get(g)),
        key=lambda g: (g is None, g or ""),
    )


def recorded_groups(
    con: duckdb.DuckDBPyConnection, catalog: str = COPY
) -> dict[tuple[str, str], Fingerprints]:
    """The fingerprints of the groups a copy recorded; none when it recorded none, or when
    another DuckDB wrote them (its ``hash`` may differ)."""
    try:
        rows = con.execute(
            f"select schema_name, relation_name, group_value, n_rows, hash_sum, hash_xor "
            f"from {manifest_table(GROUPS_TABLE, catalog)} where group_column = ? and duckdb_version = ?",
            [GROUP_COLUMN, duckdb.__version__],
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    recorded: dict[tuple[str, str], Fingerprints] = {}
    for schema, name, value, n, total, xor in rows:
        recorded.setdefault((schema, name), {})[value] = (int(n), int(total), int(xor))
    return recorded
