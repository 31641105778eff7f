"""What the viewer reads, and where its ratings land.

Every page reads the published copy (``published/<name>.duckdb`` beside the live warehouse),
through a read-only connection opened for one request and closed after it: a publish
replaces the copy with ``os.replace``, so the next request reads the new one, and an idle
viewer holds no file at all. The live warehouse is opened only to land a rating, through the
landing layer (which waits for a build that holds it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ableaudit.errors import AbleauditError
from ableaudit.warehouse import warehouse_path
from ableaudit.warehouse.connection import nearest_warehouse
from ableaudit.warehouse.publishing.catalog import MANIFEST_SCHEMA, MANIFEST_TABLE


class ViewerError(AbleauditError):
    """The viewer cannot start or answer from what it was given; the message says the fix."""


@dataclass(frozen=True)
class Sources:
    """The two files the viewer knows."""

    published: Path
    """The published copy every page reads, read-only."""
    live: Path | None
    """The live warehouse a rating lands in; None when only a copy was given (no rating then)."""


def _is_published_copy(path: Path) -> bool:
    """Whether ``path`` holds a publish's manifest (``publish.relations``)."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return False
    try:
        return bool(
            con.execute(
                "select count(*) from information_schema.tables "
                "where table_schema = ? and table_name = ?",
                [MANIFEST_SCHEMA, MANIFEST_TABLE],
            ).fetchone()[0]
        )
    finally:
        con.close()


def resolve(warehouse: str | os.PathLike | None) -> Sources:
    """The published copy of ``warehouse`` (the live file as every command names it), or
    ``warehouse`` itself when it is a published copy. The live file is never read here."""
    path = warehouse_path(warehouse)
    copy = path.parent / "published" / path.name
    if copy.is_file():
        return Sources(copy, path if path.is_file() else None)
    if path.is_file() and (path.parent.name == "published" or _is_published_copy(path)):
        live = path.parent.parent / path.name
        return Sources(path, live if path.parent.name == "published" and live.is_file() else None)
    if path.is_file():
        raise ViewerError(
            f"{path} has no published copy (looked for {copy}); the viewer reads the copy a "
            f"build publishes, never the live file: run `ableaudit publish --warehouse {path}`"
        )
    raise ViewerError(
        f"no warehouse at {path} and no published copy at {copy}{nearest_warehouse(path)}; run an audit or "
        "`ableaudit build`, or pass --warehouse naming the warehouse (or its published copy)"
    )


class Reader:
    """One request's read-only connection to the published copy."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path) -> None:
        self.con = con
        self.path = path
        found = con.execute(
            "select table_schema || '.' || table_name from information_schema.tables"
        ).fetchall()
        self.relations = {name for (name,) in found}

    def has(self, relation: str) -> bool:
        """``relation`` ('main.pair_details', 'raw.annotations') is in the copy."""
        return relation in self.relations

    def columns(self, relation: str) -> list[str]:
        schema, name = relation.split(".", 1)
        return [
            c
            for (c,) in self.con.execute(
                "select column_name from information_schema.columns "
                "where table_schema = ? and table_name = ? order by ordinal_position",
                [schema, name],
            ).fetchall()
        ]

    def rows(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Every row of a query, as dicts."""
        try:
            cursor = self.con.execute(sql, params or [])
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, r)) for r in cursor.fetchall()]
        except duckdb.Error as err:
            raise ViewerError(
                f"reading {self.path} failed ({err}); build and publish it again with "
                "`ableaudit build`"
            ) from None

    def values(self, sql: str, params: list[Any] | None = None) -> list[Any]:
        """The first column of every row."""
        return [next(iter(r.values())) for r in self.rows(sql, params)]


@contextmanager
def reading(sources: Sources) -> Iterator[Reader]:
    """A read-only connection to the published copy for one request, closed after it."""
    try:
        con = duckdb.connect(str(sources.published), read_only=True)
    except duckdb.Error as err:
        raise ViewerError(
            f"cannot open the published copy {sources.published} read-only ({err}); "
            "run `ableaudit publish` to write it again"
        ) from None
    try:
        con.execute("set enable_progress_bar = false")
        yield Reader(con, sources.published)
    finally:
        con.close()
