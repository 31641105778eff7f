"""The memory limit a build's DuckDB connections get ($ABLEAUDIT_DUCKDB_MEMORY_LIMIT)."""

from __future__ import annotations

import duckdb
import pytest

from ableaudit.warehouse.connection import (
    DEFAULT_MEMORY_LIMIT,
    MEMORY_LIMIT_ENV,
    apply_memory_limit,
    memory_limit,
)


def _limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute(
        "select value from duckdb_settings() where name = 'memory_limit'"
    ).fetchone()[0]


def test_the_default_a_size_and_none(monkeypatch):
    import psutil

    assert memory_limit({}) == DEFAULT_MEMORY_LIMIT == "2500MB"
    # on a machine whose 80% is below the default, DuckDB's own default stays
    small = type("Memory", (), {"total": 3 * 1000**3})()
    monkeypatch.setattr(psutil, "virtual_memory", lambda: small)
    assert memory_limit({}) is None
    assert memory_limit({MEMORY_LIMIT_ENV: " 8GB "}) == "8GB"
    assert memory_limit({MEMORY_LIMIT_ENV: "None"}) is None


@pytest.mark.parametrize(
    ("value", "expected"), [(None, "2.3 GiB"), ("500MB", "476.8 MiB"), ("none", None)]
)
def test_a_connection_gets_the_limit(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    else:
        monkeypatch.setenv(MEMORY_LIMIT_ENV, value)
    con = duckdb.connect()
    before = _limit_bytes(con)
    apply_memory_limit(con)
    assert _limit_bytes(con) == (expected or before)


@pytest.mark.parametrize("value", ["lots", "3GB'; drop table x; --"])
def test_a_value_duckdb_refuses_is_named_with_the_fix(monkeypatch, value):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, value)
    with pytest.raises(ValueError, match=r"ABLEAUDIT_DUCKDB_MEMORY_LIMIT=.* such as 4GB or 500MB"):
        apply_memory_limit(duckdb.connect())
