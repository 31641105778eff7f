"""ibis 12 on DuckDB 2: one shim, in one place.

ibis 12's DuckDB backend fetches results with ``fetch_arrow_table()``, which
DuckDB 2 renamed ``to_arrow_table()``. Every ibis connection of the project is
made here and its raw connection wrapped so both names work. Drop this module
when ibis catches up.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import duckdb
import ibis


class _Compat:
    """Forwards everything to a DuckDB connection, adding the old fetch name."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)

    def fetch_arrow_table(self, *args: Any, **kw: Any) -> Any:
        with warnings.catch_warnings():
            # DuckDB notes the extra copy a DB-API result makes; ibis asks for it this way.
            warnings.simplefilter("ignore", UserWarning)
            return self._inner.to_arrow_table(*args, **kw)

    def execute(self, *args: Any, **kw: Any) -> _Compat:
        return _Compat(self._inner.execute(*args, **kw))

    def sql(self, *args: Any, **kw: Any) -> Any:
        return self._inner.sql(*args, **kw)

    def cursor(self) -> _Compat:
        return _Compat(self._inner.cursor())

    def __enter__(self) -> _Compat:
        return self

    def __exit__(self, *exc: Any) -> None:
        close = getattr(self._inner, "close", None)
        if close:
            close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)


def _wrap(backend: Any) -> Any:
    if not hasattr(duckdb.DuckDBPyConnection, "fetch_arrow_table") and not isinstance(
        backend.con, _Compat
    ):
        backend.con = _Compat(backend.con)
    return backend


def connect(path: str | Path, read_only: bool = True) -> Any:
    """An ibis DuckDB backend over the warehouse file."""
    return _wrap(ibis.duckdb.connect(str(path), read_only=read_only))


def from_connection(con: duckdb.DuckDBPyConnection) -> Any:
    """An ibis DuckDB backend over an open DuckDB connection (e.g. a dbt session)."""
    return _wrap(ibis.duckdb.from_connection(con))
