"""One audit per warehouse at a time; a dead run is released and marked interrupted; older warehouses gain
the columns a newer version declares."""

from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import pytest

from ableaudit.warehouse import connect
from ableaudit.warehouse.landing import land_generations
from ableaudit.warehouse.run_lease import RunConflict, finish_run, start_run


def _runs(wh) -> dict[str, tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return {
            r[0]: r[1:]
            for r in con.execute("select run_id, status, pid, host from raw.runs").fetchall()
        }
    finally:
        con.close()


def test_a_second_run_is_refused_while_the_first_lives(warehouse):
    start_run(warehouse, "first", "{}")
    with pytest.raises(RunConflict, match="run first .* still auditing"):
        start_run(warehouse, "second", "{}")
    finish_run(warehouse, "first", "completed")
    start_run(warehouse, "second", "{}")
    assert _runs(warehouse)["second"][0] == "running"


def test_a_run_whose_process_died_is_marked_interrupted(warehouse):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    start_run(warehouse, "crashed", "{}")
    con = connect(warehouse)
    con.execute("update raw.runs set pid = ? where run_id = 'crashed'", [int(dead.stdout)])
    con.close()
    assert start_run(warehouse, "next", "{}") == ["crashed"]
    runs = _runs(warehouse)
    assert runs["crashed"][0] == "interrupted" and runs["next"][0] == "running"


def test_landing_renews_the_lease(warehouse):
    start_run(warehouse, "r1", json.dumps({}))
    con = connect(warehouse)
    con.execute("update raw.runs set heartbeat_at = timestamp '2000-01-01'")
    con.close()
    row = {
        "generation_id": "g1",
        "run_id": "r1",
        "task": "text",
        "target": "t",
        "model_id": "m",
        "backend": "import",
        "arm": "baseline",
        "query_set": "q",
        "query_id": "q1",
        "condition": "neutral",
        "prompt_id": "p",
        "prompt_text": "hi",
        "sample_index": 0,
        "status": "ok",
        "response_text": "yo",
        "source": "imported",
    }
    land_generations(warehouse, [row])
    con = duckdb.connect(str(warehouse), read_only=True)
    (year,) = con.execute("select year(heartbeat_at) from raw.runs where run_id = 'r1'").fetchone()
    con.close()
    assert year > 2000


def test_an_older_warehouse_gains_new_columns(warehouse):
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(warehouse))
    con.execute("create schema raw")
    con.execute(
        "create table raw.runs (run_id varchar primary key, config_json varchar not null, "
        "started_at timestamp not null default current_timestamp, finished_at timestamp, status varchar)"
    )
    con.execute(
        "insert into raw.runs (run_id, config_json, status) values ('old', '{}', 'completed')"
    )
    con.close()
    connect(warehouse).close()
    con = duckdb.connect(str(warehouse), read_only=True)
    cols = [
        r[0]
        for r in con.execute(
            "select column_name from information_schema.columns where table_schema = 'raw' "
            "and table_name = 'runs' order by ordinal_position"
        ).fetchall()
    ]
    kept = con.execute("select run_id, status from raw.runs").fetchall()
    (landing,) = con.execute("select landing_id from raw.runs").fetchone()
    con.close()
    assert cols[-4:] == ["host", "pid", "heartbeat_at", "landing_id"]
    assert kept == [("old", "completed")] and landing.startswith("legacy-")
