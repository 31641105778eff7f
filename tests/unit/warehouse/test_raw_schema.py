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
    allowed = {"ableaudit/warehouse/landing.py", "ableaudit/warehouse/raw_schema.py"}
    offenders = []
    for path in sorted((PROJECT_ROOT / "ableaudit").rglob("*.py")):
        rel = path.relative_to(PROJECT_ROOT).as_posix()
        if rel not in allowed and writes.search(path.read_text()):
            offenders.append(rel)
    assert offenders == []
