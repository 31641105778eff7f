"""Reading the warehouse for the report: read-only, marts first.

The report reads a published copy (``warehouse/published/<name>.duckdb``): its
marts are plain tables. The pair-level evidence comes from dbt's intermediate
models (``int_pairs``, ``int_pair_scores``, ``int_pair_judgments``) and the
staging views of the raw tables; in a copy they are views over copied tables,
compiled to plain SQL (the scorer versions are literals), so a plain DuckDB
connection reads them without the project's UDFs.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pandas as pd

from ableaudit.warehouse import warehouse_path
from ableaudit.warehouse.connection import nearest_warehouse


class ReportError(RuntimeError):
    """The report cannot be rendered from what was given (no warehouse, not built)."""


def resolve_source(warehouse: str | os.PathLike | None) -> Path:
    """The file the report reads: the published copy of ``warehouse`` when there is one, else the file itself.

    ``--warehouse`` names the live warehouse everywhere in the command line; its
    copy lies in ``published/`` beside it. Given the copy itself (or any built
    DuckDB file), the report reads that.
    """
    path = warehouse_path(warehouse)
    copy = path.parent / "published" / path.name
    if copy.is_file():
        return copy
    if path.is_file():
        return path
    raise ReportError(
        f"no warehouse at {path} and no published copy at {copy}{nearest_warehouse(path)}; "
        "run `ableaudit build` "
        "(or pass --warehouse pointing at a published copy)"
    )


class Marts:
    """A read-only connection to a built warehouse, with what it holds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.con = duckdb.connect(str(path), read_only=True)
        except duckdb.Error as err:
            raise ReportError(
                f"cannot open {path} read-only ({err}); if a build is writing it, read the published copy "
                "(`ableaudit publish`) instead"
            ) from None
        self.con.execute(
            "set enable_progress_bar = false"
        )  # no bar drawn into the command's output
        rows = self.con.execute(
            "select table_name, 'table' from duckdb_tables() where schema_name = 'main' and database_name = current_database() "
            "union all select view_name, 'view' from duckdb_views() "
            "where schema_name = 'main' and database_name = current_database() and not internal"
        ).fetchall()
        self.kinds: dict[str, str] = dict(rows)
        if "degradation" not in self.kinds:
            self.con.close()
            raise ReportError(
                f"{path} has no mart `degradation`: run `ableaudit build` on it first"
            )

    def close(self) -> None:
        self.con.close()

    def has(self, name: str) -> bool:
        """The relation exists (a table or a view)."""
        return name in self.kinds

    def frame(self, name: str, where: str = "", order: str = "") -> pd.DataFrame:
        """A whole relation (optionally filtered and ordered) as a DataFrame; empty when it does not exist."""
        if name not in self.kinds:
            return pd.DataFrame()
        sql = (
            f'select * from "{name}"'
            + (f" where {where}" if where else "")
            + (f" order by {order}" if order else "")
        )
        return self.query(sql)

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        """Any read of the warehouse, as a DataFrame."""
        try:
            return self.con.execute(sql, params or []).df()
        except duckdb.Error as err:
            raise ReportError(
                f"reading {self.path} failed ({err}); rebuild with `ableaudit build`"
            ) from None
