"""The raw layer is declared once (ableaudit.warehouse.raw_schema), and only the landing layer writes it."""

from __future__ import annotations

import re

import duckdb
import yaml

from ableaudit import PROJECT_ROOT
from ableaudit.warehouse import connect, raw_schema
from ableaudit.warehouse.landing import GENERATION_COLUMNS, JUDGMENT_COLUMNS


def test_the_dbt_sources_file_is_generated_from_the_declaration():
    on_disk = (PROJECT_ROOT / raw_schema.SOURCES_PATH).read_text()
    assert on_disk == raw_schema.sources_yml(), (
        "run `python -m ableaudit.warehouse.raw_schema` and commit the result"
    )
    tables = yaml.safe_load(on_disk)["sources"][0]["tables"]
    for t in tables:
        assert [c["name"] for c in t["columns"]] == [
            c.name for c in raw_schema.table(t["name"]).columns
        ]
        assert all(c["description"] for c in t["columns"])


def test_the_created_tables_match_the_declaration(warehouse):
    connect(warehouse).close()
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        for t in raw_schema.TABLES:
            rows = con.execute(
                "select column_name, lower(data_type), is_nullable from information_schema.columns "
                "where table_schema = 'raw' and table_name = ? order by ordinal_position",
                [t.name],
            ).fetchall()
            assert [r[0] for r in rows] == [c.name for c in t.columns], t.name
            assert [r[1] for r in rows] == [c.type for c in t.columns], t.name
            required = {r[0] for r in rows if r[2] == "NO"}
            declared = {c.name for c in t.columns if c.required} | set(t.primary_key)
            assert required == declared, t.name
    finally:
        con.close()


def test_landing_writes_with_arrow_schemas_of_the_declaration():
    assert list(GENERATION_COLUMNS) == [c.name for c in raw_schema.table("generations").written()]
    assert list(JUDGMENT_COLUMNS) == [c.name for c in raw_schema.table("judgments").written()]
    assert "created_at" not in GENERATION_COLUMNS
    # the landing layer stamps the landing; a caller's rows never carry it
    assert "landing_id" in GENERATION_COLUMNS
    assert all("landing_id" not in [c.name for c in t.landed()] for t in raw_schema.TABLES[:-1])


def test_no_module_outside_the_landing_layer_writes_raw():
    writes = re.compile(
        r"(insert\s+into|update|delete\s+from|create\s+table[^;]*?)\s+raw\.", re.IGNORECASE
    )
    allowed = {
        "ableaudit/warehouse/landing.py",
        # the landing layer's writers of an import's batches, runs, reference data and
        # forgetting, on landing.py's primitives
        "ableaudit/warehouse/batch_landing.py",
        "ableaudit/warehouse/run_lease.py",
        "ableaudit/warehouse/reference_landing.py",
        "ableaudit/warehouse/forgetting.py",
        "ableaudit/warehouse/raw_schema.py",
        # the raw layer's declaration: a table's DDL (create table raw.<name>)
        "ableaudit/warehouse/raw_columns.py",
        # the landing layer's writers for the query-set pipeline, on landing.py's primitives
        "ableaudit/warehouse/queryset_landing.py",
    }
    offenders = []
    for path in sorted((PROJECT_ROOT / "ableaudit").rglob("*.py")):
        rel = path.relative_to(PROJECT_ROOT).as_posix()
        if rel not in allowed and writes.search(path.read_text()):
            offenders.append(rel)
    assert offenders == []


def test_an_older_warehouse_with_the_generations_primary_key_is_rebuilt_without_it(tmp_path):
    """A warehouse made when raw.generations had a primary key: the first connection moves its
    rows to the table as now declared (no primary key, the key still not null), in the column
    order of the declaration, and a view over it reads the moved rows; the next connection
    changes nothing."""
    from dataclasses import replace

    path = tmp_path / "older.duckdb"
    con = duckdb.connect(str(path))
    older = replace(raw_schema.table("generations"), primary_key=("generation_id",))
    con.execute("create schema raw")
    con.execute(older.ddl())
    con.execute(
        "insert into raw.generations (generation_id, run_id, task, target, model_id, backend, "
        "arm, query_set, query_id, condition, prompt_id, prompt_text, sample_index, status, "
        "response_text, "
        "source, landing_id) select 'g' || i, 'r', 'text', 't', 'm', 'import', 'baseline', "
        "'ableaudit', 'q' || i, 'neutral', 'p' || i, 'prompt', 0, 'ok', 'answer ' || i, "
        "'imported', 'l' from range(5) t(i)"
    )
    before = con.execute("select * from raw.generations order by generation_id").fetchall()
    con.execute("create view main.answers as select generation_id from raw.generations")
    con.close()
    assert older.primary_key and "primary key (generation_id)" in older.ddl()

    def keys(c):
        return c.execute(
            "select table_name from duckdb_constraints() where schema_name = 'raw' "
            "and constraint_type = 'PRIMARY KEY' and table_name = 'generations'"
        ).fetchall()

    connect(path).close()
    con = duckdb.connect(str(path))
    try:
        assert keys(con) == []
        assert (
            con.execute("select * from raw.generations order by generation_id").fetchall() == before
        )
        assert con.execute("select count(*) from main.answers").fetchone() == (5,)
        nullable = con.execute(
            "select is_nullable from information_schema.columns where table_schema = 'raw' "
            "and table_name = 'generations' and column_name = 'generation_id'"
        ).fetchone()
        assert nullable == ("NO",)
        assert not con.execute(
            "select * from information_schema.tables where table_name like '%rebuilt%'"
        ).fetchall()
    finally:
        con.close()
    existing = set(
        duckdb.connect(str(path), read_only=True)
        .execute("select table_name, column_name from information_schema.columns")
        .fetchall()
    )
    assert raw_schema.migrations(existing) == [] and raw_schema.unindexing(set()) == []
