"""What a BI tool sees in the published copy, read with the DuckDB 1.x clients of ``.venv-bi``.

Run by tests/functional/test_bi_clients.py with the interpreter of ``.venv-bi``
(``python -I``: nothing of the project on its path), printing JSON:

    python -I bi_probe.py relations COPY MARKER   every relation, its rows and a content fingerprint
    python -I bi_probe.py sqlalchemy COPY         what Superset's column sync asks duckdb-engine
    python -I bi_probe.py parquet FOLDER          every Parquet file, its rows and fingerprint

``fingerprint`` is also imported by the test to compute the same on the live
warehouse with the project's DuckDB, so the two sides compare values, not
formatting. This file imports only duckdb (and SQLAlchemy for its mode).
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json
import sys
import warnings
from pathlib import Path


def _canon(value):
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in value.items()}
    return value


def fingerprint(con, relation: str, columns: list[str]) -> dict:
    """Rows and a sha256 of the sorted rows of ``columns`` of ``relation``, independent of row order."""
    cols = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    rows = con.execute(f"select {cols} from {relation}").fetchall()
    lines = sorted(json.dumps(_canon(list(r)), sort_keys=True, ensure_ascii=False) for r in rows)
    return {
        "rows": len(rows),
        "sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest(),
        "columns": columns,
    }


def _catalog(con) -> str:
    return con.execute("select current_database()").fetchone()[0]


def relations(copy: str, marker: str) -> dict:
    import duckdb

    con = duckdb.connect(copy, read_only=True)
    catalog = _catalog(con)
    out = {"duckdb": duckdb.__version__, "relations": {}, "views": [], "marker_found_in": []}
    out["views"] = [
        f"{s}.{v}"
        for s, v in con.execute(
            "select schema_name, view_name from duckdb_views() where database_name = ? and not internal",
            [catalog],
        ).fetchall()
    ]
    tables = con.execute(
        "select table_schema, table_name from information_schema.tables where table_catalog = ? order by all",
        [catalog],
    ).fetchall()
    for schema, name in tables:
        columns = con.execute(
            "select column_name, data_type from information_schema.columns "
            "where table_catalog = ? and table_schema = ? and table_name = ? order by ordinal_position",
            [catalog, schema, name],
        ).fetchall()
        relation = f'"{schema}"."{name}"'
        out["relations"][f"{schema}.{name}"] = fingerprint(con, relation, [c for c, _ in columns])
        for column, data_type in columns:
            if data_type == "VARCHAR" or data_type.endswith("[]"):
                (hits,) = con.execute(
                    f'select count(*) from {relation} where cast("{column}" as varchar) like ?',
                    [f"%{marker}%"],
                ).fetchone()
                if hits:
                    out["marker_found_in"].append(f"{schema}.{name}.{column}")
    return out


def sqlalchemy_sync(copy: str) -> dict:
    """The calls Superset makes: list schemas and relations, then sync every relation's columns."""
    import duckdb
    import sqlalchemy
    from sqlalchemy import create_engine, inspect, text

    warnings.simplefilter(
        "ignore"
    )  # duckdb-engine warns that it reflects no indexes, and of list types
    engine = create_engine(f"duckdb:///{copy}", connect_args={"read_only": True})
    inspector = inspect(engine)
    out = {
        "sqlalchemy": sqlalchemy.__version__,
        "duckdb": duckdb.__version__,
        "schemas": inspector.get_schema_names(),
        "default_tables": sorted(inspector.get_table_names()),
        "relations": {},
        "views": [],
        "errors": [],
    }
    catalog = Path(copy).stem
    for schema in out["schemas"]:
        if schema.split(".")[0].strip('"') != catalog:
            continue
        out["views"] += [f"{schema}.{v}" for v in inspector.get_view_names(schema=schema)]
        for table in inspector.get_table_names(schema=schema):
            key = f"{schema.split('.', 1)[1]}.{table}"
            try:
                columns = inspector.get_columns(table, schema=schema)
                pk = inspector.get_pk_constraint(table, schema=schema)
                fks = inspector.get_foreign_keys(table, schema=schema)
                indexes = inspector.get_indexes(table, schema=schema)
                with engine.connect() as con:
                    n = con.execute(text(f'select count(*) from {schema}."{table}"')).scalar()
            except Exception as err:  # noqa: BLE001 - every failing relation is reported, not only the first
                out["errors"].append(f"{key}: {type(err).__name__}: {str(err)[:300]}")
                continue
            out["relations"][key] = {
                "columns": [c["name"] for c in columns],
                "types": [str(c["type"]) for c in columns],
                "pk": pk.get("constrained_columns"),
                "n_foreign_keys": len(fks),
                "n_indexes": len(indexes),
                "rows": n,
            }
    return out


def parquet(folder: str) -> dict:
    import duckdb

    con = duckdb.connect()
    out = {"duckdb": duckdb.__version__, "files": {}}
    # a mart's file, or a folder of files (one per model) read as one relation
    found = [(p.stem, p.as_posix()) for p in Path(folder).glob("*.parquet")]
    found += [(p.name, f"{p.as_posix()}/*.parquet") for p in Path(folder).iterdir() if p.is_dir()]
    for name, path in sorted(found):
        relation = f"read_parquet('{path}')"
        columns = [d[0] for d in con.execute(f"select * from {relation} limit 0").description]
        out["files"][name] = fingerprint(con, relation, columns)
    return out


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    result = {"relations": relations, "sqlalchemy": sqlalchemy_sync, "parquet": parquet}[mode](
        *args
    )
    print(json.dumps(result))
