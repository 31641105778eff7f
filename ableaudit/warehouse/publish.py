"""Publish the warehouse for BI: a read-only copy and Parquet files of the marts.

BI tools never read the live file: DuckDB lets one process
write, and a reader would block the next build. After each build, ``publish``
writes ``published/<warehouse name>.duckdb`` (``published/ableaudit.duckdb`` for
the default warehouse) and ``published/parquet/<mart>.parquet``, each first
under a temporary name and then moved into place with ``os.replace``, so a
reader sees the previous complete copy or the new one, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from ableaudit import PROJECT_ROOT
from ableaudit.warehouse import warehouse_path

MARTS_DIRS = (PROJECT_ROOT / "models" / "marts", PROJECT_ROOT / "python_models" / "marts")


def mart_names(marts_dirs: tuple[Path, ...] = MARTS_DIRS) -> list[str]:
    """Every model under models/marts and python_models/marts (one .sql or .py file per mart)."""
    return sorted(p.stem for d in marts_dirs for p in d.rglob("*") if p.suffix in (".sql", ".py"))


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def publish(warehouse: str | os.PathLike | None = None, out_dir: str | os.PathLike | None = None) -> Path:
    """Write the BI copy and the mart Parquet files; return the copy's path.

    The copy keeps the warehouse's file name, hence its catalog name, so the
    views dbt built (which name their catalog) resolve in the copy too.
    """
    src = warehouse_path(warehouse)
    if not src.is_file():
        raise FileNotFoundError(f"no warehouse at {src}; run `ableaudit build` first")
    out = Path(out_dir).expanduser().resolve() if out_dir else src.parent / "published"
    parquet_dir = out / "parquet"
    parquet_dir.mkdir(parents=True, exist_ok=True)
    target = out / src.name
    tmp = out / f".{src.stem}.{os.getpid()}.tmp.duckdb"
    tmp.unlink(missing_ok=True)
    catalog = src.stem
    con = duckdb.connect(":memory:")
    try:
        try:
            con.execute(f"attach {_literal(str(src))} as {_quote(catalog)} (read_only)")
        except duckdb.Error as err:
            raise RuntimeError(
                f"cannot read the warehouse {src} to publish it ({err}); close the process "
                "writing it (a dbt run, an audit) and run `ableaudit publish` again"
            ) from None
        con.execute(f"attach {_literal(str(tmp))} as published_copy")
        con.execute(f"copy from database {_quote(catalog)} to published_copy")
        con.execute("detach published_copy")

        missing = []
        written = []
        tables = {
            name
            for (name,) in con.execute(
                "select table_name from duckdb_tables() where database_name = ? and schema_name = 'main'",
                [catalog],
            ).fetchall()
        }
        for mart in mart_names():
            if mart not in tables:
                missing.append(mart)
                continue
            part = parquet_dir / f".{mart}.{os.getpid()}.tmp.parquet"
            con.execute(
                f"copy (select * from {_quote(catalog)}.main.{_quote(mart)}) to {_literal(str(part))} (format parquet)"
            )
            written.append((part, parquet_dir / f"{mart}.parquet"))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        con.close()
    if missing:
        tmp.unlink(missing_ok=True)
        for part, _ in written:
            part.unlink(missing_ok=True)
        raise RuntimeError(f"marts {missing} are not tables in {src}; run `ableaudit build` before publishing")
    os.replace(tmp, target)
    for part, final in written:
        os.replace(part, final)
    return target
