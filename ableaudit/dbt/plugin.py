"""dbt-duckdb plugin: the raw layer and the scorer UDFs on every dbt connection.

profiles.yml lists ``plugins: [{module: ableaudit.dbt.plugin}]``. This module
only wires: the scoring logic lives in ``ableaudit.scorers``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
from dbt.adapters.duckdb.plugins import BasePlugin

from ableaudit.dbt.code import code_digest
from ableaudit.scorers.registry import catalog, registered, scorer_version
from ableaudit.warehouse import ensure_raw_schema
from ableaudit.warehouse.connection import apply_memory_limit


def register_udfs(conn: duckdb.DuckDBPyConnection) -> None:
    """Every per-text scorer of the registry as a SQL function, ``ableaudit_scorer_version``,
    ``ableaudit_scorer_catalog`` and ``ableaudit_code_digest`` (also usable outside dbt, e.g. in tests or notebooks)."""
    for entry in registered().values():
        if entry.sql_function is None:
            continue
        conn.create_function(
            entry.sql_function,
            entry.function,
            [duckdb.sqltype(t) for t in entry.arguments],
            duckdb.sqltype(entry.returns),
            type="arrow",
            null_handling="special" if entry.returns_nulls else "default",
            side_effects=entry.side_effects,
        )
    varchar = duckdb.sqltype("VARCHAR")
    conn.create_function("ableaudit_scorer_version", scorer_version, [varchar, varchar], varchar)
    # the registry as JSON, from which macro registered_scorers derives the scorers' SQL
    conn.create_function("ableaudit_scorer_catalog", catalog, [varchar], varchar)
    # the code a module runs (ableaudit.dbt.code): macro reuse_key reads that of this plugin,
    # whose UDFs any SQL node may call
    conn.create_function("ableaudit_code_digest", code_digest, [varchar], varchar)


WAREHOUSE_ENV = "ABLEAUDIT_WAREHOUSE"
DEFAULT_WAREHOUSE_FILE = "warehouse/ableaudit.duckdb"
"""What profiles.yml reads: the warehouse file is $ABLEAUDIT_WAREHOUSE, else this (from the
current folder, as dbt always resolved it)."""


def warehouse_file(profile_path: str | None) -> str | None:
    """The file to open for the profile's ``path``: $ABLEAUDIT_WAREHOUSE (or the default) when
    the profile holds that file's name alone, else the profile's path as it is (``:memory:``,
    a full path written into a profile)."""
    chosen = os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE_FILE
    if profile_path and "/" not in profile_path and chosen.split("/")[-1] == profile_path:
        return chosen
    return profile_path


def _is_read_only(conn: duckdb.DuckDBPyConnection) -> bool:
    rows = conn.execute(
        "select readonly from duckdb_databases() where database_name = current_database()"
    ).fetchall()  # fetchall: DuckDB 2 refuses new work while a result is half read
    return bool(rows and rows[0][0])


class Plugin(BasePlugin):
    def update_connection_config(self, creds: Any, config: dict[str, Any]) -> None:
        # profiles.yml names the warehouse file without its folder, so that the parsed project
        # does not depend on the folder (dbt parses again whenever the profile changes); the
        # folder is put in for DuckDB to open the file, and taken out again once it is open
        # (configure_connection): dbt compares the profile's values at the next parse.
        if getattr(self, "_creds", None) is not creds:
            self._creds, self._profile_path = creds, getattr(creds, "path", None)
        creds.path = warehouse_file(self._profile_path)
        # DuckDB creates the file but not its folder: `dbt build` on a fresh clone
        # must not fail because warehouse/ does not exist yet.
        path = creds.path or ":memory:"
        if path != ":memory:" and "://" not in path and not path.startswith("md:"):
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)

    def configure_connection(self, conn: duckdb.DuckDBPyConnection) -> None:
        creds = getattr(self, "_creds", None)
        if creds is not None:
            creds.path = self._profile_path
        apply_memory_limit(conn)
        if not _is_read_only(conn):
            ensure_raw_schema(conn)
        register_udfs(conn)
