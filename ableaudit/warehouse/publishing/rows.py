"""Row diffs: bringing one relation of the copy up to date, model by model or row by row, or writing it again whole."""

from __future__ import annotations

import logging

import duckdb

from ableaudit.warehouse.publishing.catalog import (
    COPY,
    GROUP_COLUMN,
    STORAGE_VERSION_ENV,
    WITHHELD_COLUMNS,
    PublishedRelation,
    literal,
    quote,
    relation_columns,
)
from ableaudit.warehouse.publishing.fingerprints import (
    Fingerprints,
    Groups,
    built_groups,
    changed_groups,
    fingerprint,
    group_fingerprints,
)

log = logging.getLogger(__name__)


REWRITE_CHANGED_SHARE = 0.5
"""A relation is written whole, rather than updated row by row, when more than this share of
the previous copy's rows changed (deleting and inserting most of a table costs more than
writing it, and leaves free blocks behind)."""


def changed_hashes(con: duckdb.DuckDBPyConnection) -> None:
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


def update_rows(
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
        changed_hashes(con)
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


def in_groups(values: list[str | None]) -> str:
    """A filter on ``GROUP_COLUMN`` for these values, as literals."""
    group = quote(GROUP_COLUMN)
    named = [v for v in values if v is not None]
    parts = [f"{group} in ({', '.join(literal(v) for v in named)})"] if named else []
    if len(named) < len(values):
        parts.append(f"{group} is null")
    return " or ".join(parts)


MAX_GROUP_BRANCHES = 8
"""Up to this many groups are read again from a relation one query branch each."""


def rows_of_groups(source: str, values: list[str | None], columns: str = "*") -> str:
    """A query of the rows of ``source`` in these groups (values of ``GROUP_COLUMN``), with the
    filter pushed down into a view's scans: each group is a branch of its own, with an equality,
    which DuckDB carries across a join's keys into the other side (a view that joins an
    aggregate by generation and model); an `in` list or an `or` it does not. More than
    ``MAX_GROUP_BRANCHES`` groups are read with one `in` list."""
    group = quote(GROUP_COLUMN)
    named = [v for v in values if v is not None]
    if len(named) <= MAX_GROUP_BRANCHES:
        filters = [f"{group} = {literal(v)}" for v in named]
    else:
        filters = [in_groups(named)]
    if len(named) < len(values):
        filters.append(f"{group} is null")
    return " union all ".join(f"select {columns} from {source} where {f}" for f in filters)


def update_groups(
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
    return what was done ('unchanged', 'updated' or 'rewrite', as ``update_rows``), the
    fingerprints of ``source`` and the groups that differ.

    ``source`` is read and hashed once; of ``target`` only the group column is read, to check
    that it still holds the rows its record says (None when it does not: the row by row
    update then takes over). The rows of the changed groups are read from ``source`` again,
    with the filter pushed down into a view. With ``candidates`` (the only groups whose rows
    may have changed: ``local_candidates``), only those groups are hashed; the others keep
    the fingerprints the previous publish recorded.
    """
    group = quote(GROUP_COLUMN)
    held = dict(con.execute(f"select {group}, count(*) from {target} group by {group}").fetchall())
    if held != {g: n for g, (n, _, _) in previous.items()}:
        return None
    if live is None and candidates is not None:
        live = {g: fp for g, fp in previous.items() if g not in candidates}
        if candidates:
            hashed = rows_of_groups(source, sorted(candidates, key=lambda g: (g is None, g or "")))
            live.update(group_fingerprints(con, f"({hashed})", columns))
    elif live is None:
        live = group_fingerprints(con, source, columns)
    changed = changed_groups(live, previous)
    if not changed:
        return "unchanged", live, []
    gone = sum(previous[g][0] for g in changed if g in previous)
    if gone > REWRITE_CHANGED_SHARE * sum(n for n, _, _ in previous.values()):
        return "rewrite", live, changed
    con.execute(f"delete from {target} where {in_groups(changed)}")
    con.execute(f"insert into {target} {rows_of_groups(source, changed, columns)}")
    return "updated", live, changed


def copy_relation(
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
    rows may have changed, when that is known (``update_groups``).
    """
    source = f"{quote(catalog)}.{quote(schema)}.{quote(name)}"
    if kind == "view":
        try:
            con.execute(f"select * from {source} limit 0")
        except duckdb.Error as err:
            note = f"the view cannot be read without the project's code or a missing upstream relation: {err}"
            log.warning("left out of the published copy: %s.%s (%s)", schema, name, note)
            return PublishedRelation(schema, name, kind, False, None, (), note)
    columns = relation_columns(con, catalog, schema, name)
    withheld = tuple(c for c, _ in columns if c in WITHHELD_COLUMNS)
    kept = [(c, t) for c, t in columns if c not in WITHHELD_COLUMNS]
    if not kept:
        note = f"every column is a withheld config column ({', '.join(withheld)})"
        return PublishedRelation(schema, name, kind, False, None, withheld, note)
    target = f"{COPY}.{quote(schema)}.{quote(name)}"
    listed = ", ".join(quote(c) for c, _ in kept)
    grouped = (GROUP_COLUMN, "VARCHAR") in kept
    try:
        built = (
            built_groups(con, source, kept, groups.built.get((schema, name))) if grouped else None
        )
        change, fingerprints = "written", None
        if in_copy.get((schema, name)) == kept:
            previous = groups.previous.get((schema, name)) if grouped else None
            by_group = (
                update_groups(con, source, target, listed, previous, built, candidates)
                if previous is not None
                else None
            )
            if by_group is None:
                change = update_rows(con, source, target, listed, kind == "table")
            else:
                change, fingerprints, groups.changed[(schema, name)] = by_group
        if change in ("written", "rewrite"):
            groups.changed.pop((schema, name), None)
            con.execute(f"create schema if not exists {COPY}.{quote(schema)}")
            con.execute(f"drop table if exists {target}")
            con.execute(f"create table {target} as select {listed} from {source}")
            change, fingerprints = "written", None
        if grouped:
            groups.current[(schema, name)] = (
                fingerprints or built or group_fingerprints(con, target, listed)
            )
    except duckdb.Error as err:
        raise RuntimeError(
            f"cannot write {schema}.{name} into a copy in storage version {version} ({err}); publish with a "
            f"newer --storage-version (or ${STORAGE_VERSION_ENV}), which fewer DuckDB 1.x clients read"
        ) from None
    (n_rows,) = con.execute(f"select count(*) from {target}").fetchone()
    note = f"withheld: {', '.join(withheld)} (a stored config)" if withheld else None
    return PublishedRelation(schema, name, kind, True, int(n_rows), withheld, note, change)
