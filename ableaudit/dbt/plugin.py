"""dbt-duckdb plugin: the raw layer and the scorer UDFs on every dbt connection.

profiles.yml lists ``plugins: [{module: ableaudit.dbt.plugin}]``. This module
only wires: the scoring logic lives in ``ableaudit.scorers``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from dbt.adapters.duckdb.plugins import BasePlugin

from ableaudit.dbt.code import code_digest
from ableaudit.judges.dimensions import catalog as dimension_catalog
from ableaudit.scorers.masking import mask_text
from ableaudit.scorers.pair_declare import PAIR_SCORE_SQL_TYPE
from ableaudit.scorers.pair_registry import pair_catalog, pair_scorer_version, registered_pairs
from ableaudit.scorers.registry import catalog, registered, scorer_version
from ableaudit.warehouse import ensure_raw_schema
from ableaudit.warehouse.connection import apply_memory_limit


def register_udfs(conn: duckdb.DuckDBPyConnection) -> None:
    """Every per-text scorer of the registry and every pair scorer as a SQL function,
    ``ableaudit_scorer_version``, ``ableaudit_pair_scorer_version``, ``ableaudit_mask_text``,
    ``ableaudit_scorer_catalog``, ``ableaudit_judge_dimension_catalog``, ``ableaudit_pair_scorer_catalog`` and ``ableaudit_code_digest``
    and ``ableaudit_t_quantile`` (also usable outside dbt, e.g. in tests or notebooks)."""
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
    for pair in registered_pairs().values():
        conn.create_function(
            pair.sql_function,
            pair.function,
            [duckdb.sqltype(t) for t in pair.arguments],
            duckdb.sqltype(PAIR_SCORE_SQL_TYPE),
            type="arrow",
        )
    conn.create_function("ableaudit_scorer_version", scorer_version, [varchar, varchar], varchar)
    # what a masked scorer reads: the text with the terms replaced by the neutral token
    conn.create_function(
        "ableaudit_mask_text", mask_text, [varchar, duckdb.list_type(varchar)], varchar
    )
    # the pair scorers (ableaudit.scorers.pair_registry), for macro registered_pair_scorers
    conn.create_function(
        "ableaudit_pair_scorer_version", pair_scorer_version, [varchar, varchar], varchar
    )
    conn.create_function("ableaudit_pair_scorer_catalog", pair_catalog, [varchar], varchar)
    # the registry as JSON, from which macro registered_scorers derives the scorers' SQL
    conn.create_function("ableaudit_scorer_catalog", catalog, [varchar], varchar)
    # the built-in judge dimension sets, from which macro builtin_dimension_sets derives SQL
    conn.create_function("ableaudit_judge_dimension_catalog", dimension_catalog, [], varchar)
    # the code a module runs (ableaudit.dbt.code): macro reuse_key reads that of this plugin,
    # whose UDFs any SQL node may call
    conn.create_function("ableaudit_code_digest", code_digest, [varchar], varchar)
    # Student's t quantile (scipy), for the rate intervals of macro cluster_rate_interval
    double = duckdb.sqltype("DOUBLE")
    conn.create_function("ableaudit_t_quantile", t_quantile, [double, double], double, type="arrow")


def t_quantile(probability: pa.Array, df: pa.Array) -> pa.Array:
    """scipy's quantile of Student's t at ``probability`` with ``df`` degrees of freedom
    (null where either is null; NaN where df <= 0)."""
    from scipy import stats  # imported when a build first asks, not at every dbt start

    p = probability.to_numpy(zero_copy_only=False)
    d = df.to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        q = stats.t.ppf(p, d)
    return pa.array(q, mask=np.isnan(p) | np.isnan(d), type=pa.float64())


WAREHOUSE_ENV = "ABLEAUDIT_WAREHOUSE"
DEFAULT_WAREHOUSE_FILE = "warehouse/ableaudit.duckdb"
"""The warehouse file when $ABLEAUDIT_WAREHOUSE is unset (from the current folder, as dbt
always resolved it)."""

PROFILE_PATH = "ableaudit.duckdb"
"""The ``path`` of profiles.yml's dev target. It names no file: it gives dbt the database name
``DATABASE``, and the plugin attaches $ABLEAUDIT_WAREHOUSE (or the default) under that name."""

DATABASE = "ableaudit"
"""The name of the warehouse in dbt's SQL, whatever the file is called. dbt-duckdb would name
the database after the file, and dbt pastes that name into SQL unquoted: a name with a quote
or a semicolon, or one that ``urlparse`` cuts at ``?`` or ``#``, could not be built."""


def warehouse_file(profile_path: str | None) -> str | None:
    """The file to attach for the profile's ``path``: $ABLEAUDIT_WAREHOUSE (or the default) for
    ``PROFILE_PATH``; None for any other path (``:memory:``, a full path written into a profile),
    which dbt-duckdb opens as it is."""
    if profile_path != PROFILE_PATH:
        return None
    return os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE_FILE


def _literal(text: str) -> str:
    """A SQL string literal: ATTACH takes no bound parameter."""
    return "'" + text.replace("'", "''") + "'"


def _is_read_only(conn: duckdb.DuckDBPyConnection) -> bool:
    rows = conn.execute(
        "select readonly from duckdb_databases() where database_name = current_database()"
    ).fetchall()  # fetchall: DuckDB 2 refuses new work while a result is half read
    return bool(rows and rows[0][0])


class Plugin(BasePlugin):
    def update_connection_config(self, creds: Any, config: dict[str, Any]) -> None:
        # The profile's path gives dbt the database name; DuckDB opens an in-memory database,
        # and configure_connection attaches the warehouse file under that name. The profile
        # stays as dbt read it (configure_connection puts its path back): dbt compares the
        # profile's values at the next parse, and parses the project again when they differ.
        if getattr(self, "_creds", None) is not creds:
            self._creds, self._profile_path = creds, getattr(creds, "path", None)
        self._file = warehouse_file(self._profile_path)
        if self._file is None:
            # a profile of its own (:memory:, a full path): DuckDB creates the file but not
            # its folder, and a fresh clone has no warehouse/ yet
            path = creds.path or ":memory:"
            if path != ":memory:" and "://" not in path and not path.startswith("md:"):
                Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            return
        wh = Path(self._file).expanduser().resolve()
        wh.parent.mkdir(parents=True, exist_ok=True)
        self._file = str(wh)
        creds.path = ":memory:"
        # where a file database spills what does not fit its memory limit: beside the file
        config.setdefault("temp_directory", f"{wh}.tmp")

    def configure_connection(self, conn: duckdb.DuckDBPyConnection) -> None:
        creds = getattr(self, "_creds", None)
        if creds is not None:
            creds.path = self._profile_path
        if getattr(self, "_file", None) is not None:
            # the file's path is a value (quoted here), its name never reaches SQL; with the
            # in-memory database detached, every cursor dbt opens starts in the warehouse
            attached = dict(
                conn.execute("select database_name, path from duckdb_databases()").fetchall()
            )
            if attached.get(DATABASE) != self._file:
                # a connection dbt opens again after a failed open (the warehouse was taken)
                # can find the file already attached to the same DuckDB instance
                conn.execute(f"attach {_literal(self._file)} as {DATABASE}")
            conn.execute(f"use {DATABASE}")
            if "memory" in attached:
                conn.execute("detach memory")
        apply_memory_limit(conn)
        if not _is_read_only(conn):
            ensure_raw_schema(conn)
        register_udfs(conn)
