"""The published copy opened by the clients BI tools embed: DuckDB 1.x, not the project's DuckDB.

A small warehouse is built from the synthetic rows of one model and published,
then the other model lands, and it is built and published again: the copy the
clients read is the first one updated where the warehouse changed. Then the
clients of ``.venv-bi`` (``make bi-clients``: the PyPI DuckDB 1.5.6 CLI, python
duckdb 1.5.6, and duckdb-engine on SQLAlchemy 1.4 as Superset runs it) read the
copy and the Parquet files in their own interpreter, with nothing of the
project on their path. Every relation must come back with the rows and values
of the live warehouse (read here with the project's DuckDB), as a plain table,
without the stored configs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import duckdb
import pytest

from ableaudit import PROJECT_ROOT
from ableaudit.dbt.runner import run_dbt
from ableaudit.warehouse import connect
from ableaudit.warehouse.publish import mart_names, publish
from tests.fixtures.warehouse import land, synthetic_generations
from tests.functional.bi_probe import fingerprint

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.usefixtures("dbt_env")]

BI_VENV = PROJECT_ROOT / ".venv-bi"
PROBE = Path(__file__).with_name("bi_probe.py")
MARKER = "config-marker-7f3a"  # stands for anything a stored config could hold
CONFIG_COLUMNS = {"config_json", "params_json"}
LATER_MODEL = "model-b"  # lands after the first publish
# what the publish says of the copy
MANIFEST = {
    "publish.relations",
    "publish.relation_groups",
    "publish.view_definitions",
    "publish.parquet_files",
}


def bi_tool(name: str) -> Path:
    """A program of .venv-bi; CI must have it, a developer without it is told how to make it."""
    path = BI_VENV / "bin" / name
    if not path.exists():
        reason = f"{BI_VENV} is missing: `make bi-clients` creates it (the DuckDB 1.x clients of requirements-bi.lock)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def probe(*args: str) -> dict:
    res = subprocess.run(
        [str(bi_tool("python")), "-I", str(PROBE), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def published(dbt_env, tmp_path_factory) -> tuple[Path, Path]:
    """(live warehouse, published copy): the synthetic rows, a run whose config holds the marker,
    built and published with one model, then again with the other."""
    bi_tool("python")
    wh = tmp_path_factory.mktemp("bi") / "ableaudit.duckdb"
    connect(wh).close()
    rows = synthetic_generations()
    land(wh, [r for r in rows if r["model_id"] != LATER_MODEL])
    con = duckdb.connect(str(wh))
    config = {
        "targets": [{"name": "model-a", "params_b": 7, "api_key_env": MARKER}],
        "note": MARKER,
    }
    con.execute(
        "insert into raw.runs (run_id, config_json, status) values ('run-1', ?, 'completed')",
        [json.dumps(config)],
    )
    con.execute(
        "insert into raw.adapters (adapter_id, kind, name, version, base_model, path, data_snapshot, params_json) "
        "values ('dpo-v1', 'dpo', 'dpo', 1, 'builtin:tiny', 'adapters/dpo-v1', '{}', ?)",
        [json.dumps({"learning_rate": 1e-4, "note": MARKER})],
    )
    con.close()
    run_dbt(["seed"], wh)
    run_dbt(["run"], wh)
    publish(wh, wh.parent / "published")
    land(wh, [r for r in rows if r["model_id"] == LATER_MODEL])
    run_dbt(["run"], wh)
    return wh, publish(wh, wh.parent / "published")


@pytest.fixture(scope="module")
def live(published) -> dict[str, dict]:
    """Every relation of the live warehouse but the bookkeeping of incremental builds (dbt_state,
    not published), less the config columns, fingerprinted with the project's DuckDB."""
    wh, _ = published
    con = duckdb.connect(str(wh), read_only=True)
    try:
        names = con.execute(
            "select schema_name, table_name from duckdb_tables() where database_name = current_database() "
            "union all select schema_name, view_name from duckdb_views() "
            "where database_name = current_database() and not internal"
        ).fetchall()
        names = [(schema, name) for schema, name in names if schema != "dbt_state"]
        out = {}
        for schema, name in names:
            columns = [
                c
                for (c,) in con.execute(
                    "select column_name from duckdb_columns() where database_name = current_database() "
                    "and schema_name = ? and table_name = ? order by column_index",
                    [schema, name],
                ).fetchall()
                if c not in CONFIG_COLUMNS
            ]
            out[f"{schema}.{name}"] = fingerprint(con, f'"{schema}"."{name}"', columns)
        return out
    finally:
        con.close()


@pytest.mark.long
def test_duckdb_cli_1x_lists_and_reads_every_mart(published, live):
    _, copy = published
    cli = str(bi_tool("duckdb"))
    assert subprocess.run(
        [cli, "--version"], capture_output=True, text=True, check=True
    ).stdout.startswith("v1.")

    def sql(query: str) -> list[dict]:
        res = subprocess.run(
            [cli, "-readonly", "-json", str(copy)],
            input=query,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert res.returncode == 0 and not res.stderr, res.stderr
        return json.loads(res.stdout)

    tables = sql(
        "select table_schema || '.' || table_name as name, table_type from information_schema.tables;"
    )
    assert {t["name"] for t in tables} == set(live) | MANIFEST
    assert {t["table_type"] for t in tables} == {"BASE TABLE"}  # every view was materialised

    # count(t) reads every column of every row, so an unreadable column fails here, not only a count
    counts = sql(
        " union all ".join(
            f"select '{m}' as mart, count(*) as n, count(t) as n_read from main.\"{m}\" as t"
            for m in mart_names()
        )
        + ";"
    )
    assert {c["mart"]: (c["n"], c["n_read"]) for c in counts} == {
        m: (live[f"main.{m}"]["rows"],) * 2 for m in mart_names()
    }
    assert (
        live["main.degradation"]["rows"] > 0 and live["main.data_quality"]["rows"] > 0
    )  # not an empty warehouse


def test_the_copy_read_is_the_previous_one_updated(published):
    """The second publish updated the first copy: the relations that gained the later model's
    rows were updated row by row, the others left as they were (a relation most of whose rows
    changed, e.g. one compared across models, is written whole)."""
    _, copy = published
    con = duckdb.connect(str(copy), read_only=True)
    try:
        changes = dict(
            con.execute(
                "select schema_name || '.' || relation_name, change from publish.relations"
            ).fetchall()
        )
    finally:
        con.close()
    for relation in ("raw.generations", "main.int_pairs", "main.pair_details", "main.degradation"):
        assert changes[relation] == "updated", relation
    assert changes["main.disabilities"] == "unchanged"  # a seed
    wh, _ = published
    for relation in ("raw.generations", "pair_details"):  # updated model by model
        con = duckdb.connect(str(copy), read_only=True)
        try:
            recorded = con.execute(
                "select group_value, n_rows from publish.relation_groups "
                "where relation_name = ? order by 1",
                [relation.rpartition(".")[2]],
            ).fetchall()
        finally:
            con.close()
        con = duckdb.connect(str(wh), read_only=True)
        try:
            held = con.execute(
                f"select model_id, count(*) from {relation} group by 1 order by 1"
            ).fetchall()
        finally:
            con.close()
        assert LATER_MODEL in dict(held) and recorded == held, relation


def test_python_duckdb_1x_reads_every_relation_as_in_the_live_warehouse(published, live):
    wh, copy = published
    got = probe("relations", str(copy), MARKER)
    assert got["duckdb"].startswith("1.")
    assert got["views"] == []
    manifest = got["relations"].pop("publish.relations")
    assert manifest["rows"] == len(live)
    assert got["relations"].pop("publish.relation_groups")["rows"] > 0
    assert got["relations"].pop("publish.view_definitions")["rows"] > 0
    # a file per mart, but pair_details: a file per model
    model_files = list((copy.parent / wh.stem / "parquet" / "pair_details").glob("*.parquet"))
    files = len(mart_names()) - 1 + len(model_files)
    assert len(model_files) > 1 and got["relations"].pop("publish.parquet_files")["rows"] == files
    assert got["relations"] == live  # same relations, columns, rows and values
    assert got["marker_found_in"] == []  # nothing of a stored config reached the copy
    assert (
        got["relations"]["raw.runs"]["rows"] == 1
        and "config_json" not in got["relations"]["raw.runs"]["columns"]
    )
    assert "params_json" not in got["relations"]["raw.adapters"]["columns"]


def test_superset_driver_syncs_every_relation(published, live):
    """duckdb-engine 0.17 on SQLAlchemy 1.4 (Superset pins SQLAlchemy below 2), read-only."""
    _, copy = published
    got = probe("sqlalchemy", str(copy))
    assert got["sqlalchemy"].startswith("1.4.") and got["duckdb"].startswith("1.")
    assert got["errors"] == []
    assert {"ableaudit.main", "ableaudit.raw"} <= set(got["schemas"])
    assert got["views"] == []
    assert set(got["relations"]) == set(live) | MANIFEST
    assert set(got["default_tables"]) == {key.split(".", 1)[1] for key in got["relations"]}
    for key, expected in live.items():
        synced = got["relations"][key]
        assert synced["columns"] == expected["columns"], key
        assert synced["rows"] == expected["rows"], key
        assert synced["pk"] == [] and synced["n_foreign_keys"] == 0 and synced["n_indexes"] == 0, (
            key
        )
    assert "config_json" not in got["relations"]["raw.runs"]["columns"]


def test_parquet_files_read_by_duckdb_1x_equal_the_marts(published, live):
    wh, copy = published
    folder = copy.parent / wh.stem / "parquet"
    got = probe("parquet", str(folder))
    assert got["duckdb"].startswith("1.")
    assert got["files"] == {m: live[f"main.{m}"] for m in mart_names()}
    assert (folder / "pair_details").is_dir() and not (folder / "pair_details.parquet").exists()


def test_superset_driver_types_every_column_of_the_pair_export(published, live):
    """pair_details is flat: duckdb-engine gives each column a type (a list or struct would be NullType)."""
    _, copy = published
    got = probe("sqlalchemy", str(copy))
    synced = got["relations"]["main.pair_details"]
    assert synced["columns"] == live["main.pair_details"]["columns"]
    assert synced["rows"] == live["main.pair_details"]["rows"] > 0
    untyped = [c for c, t in zip(synced["columns"], synced["types"], strict=True) if t == "NULL"]
    assert untyped == []
