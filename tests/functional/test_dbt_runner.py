"""dbt runs in-process through dbtRunner and lets go of the warehouse file afterwards."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

from ableaudit.dbt.runner import DbtError, run_dbt

pytestmark = [pytest.mark.slow, pytest.mark.dbt_data_tests, pytest.mark.usefixtures("dbt_env")]


def test_another_process_can_write_the_warehouse_after_a_run(warehouse):
    run_dbt(["seed", "--select", "domains"], warehouse)
    probe = "import duckdb, sys; c = duckdb.connect(sys.argv[1]); c.execute('select 1'); c.close()"
    out = subprocess.run(
        [sys.executable, "-c", probe, str(warehouse)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr


def test_a_failing_command_names_the_warehouse(warehouse):
    with pytest.raises(DbtError, match=str(warehouse.name)):
        run_dbt(["run-operation", "no_such_macro_anywhere"], warehouse)


def test_another_warehouse_reuses_the_parsed_project(tmp_path, capfd):
    """profiles.yml is the same for every warehouse: dbt keeps its partial parse when the folder
    and the file's name change, and the plugin opens the file named."""
    run_dbt(["parse"], tmp_path / "a" / "ableaudit.duckdb")
    capfd.readouterr()
    other = tmp_path / "b" / "other name.duckdb"
    run_dbt(["seed", "--select", "domains"], other)
    out = capfd.readouterr().out
    assert "Unable to do partial parsing" not in out and "Performance info" not in out
    con = duckdb.connect(str(other), read_only=True)
    try:
        assert con.execute("select count(*) from main.domains").fetchone()[0] > 0
    finally:
        con.close()


def test_dbt_connects_under_the_memory_limit_and_says_how_to_raise_it(warehouse, monkeypatch):
    """$ABLEAUDIT_DUCKDB_MEMORY_LIMIT reaches dbt's connection (the project's plugin sets it):
    under a limit too small for a query, the command fails with DuckDB's out-of-memory line
    and the variable to raise. The query builds one list of two million integers (16 MB),
    which DuckDB cannot spill: how much a small insert needs depends on the blocks the
    process already holds, a list of 16 MB never fits in 1 MB."""
    query = ["show", "--inline", "select len(list(i)) as n from range(2000000) t(i)"]
    monkeypatch.setenv("ABLEAUDIT_DUCKDB_MEMORY_LIMIT", "1MB")
    with pytest.raises(DbtError) as failed:
        run_dbt(query, warehouse)
    message = str(failed.value)
    assert "Out of Memory Error" in message
    assert (
        "DuckDB ran out of the memory it may use (1MB); raise $ABLEAUDIT_DUCKDB_MEMORY_LIMIT"
        in message
    )
    monkeypatch.setenv("ABLEAUDIT_DUCKDB_MEMORY_LIMIT", "none")
    run_dbt(query, warehouse)  # DuckDB's own default: it fits


def test_dbt_records_the_command_ableaudit_chose_never_the_users(warehouse, monkeypatch):
    """dbt writes ``sys.argv`` into logs/dbt.log and target/ as ``invocation_command``; the
    user's command line may hold a URL with its key."""
    import json
    import os
    from pathlib import Path

    canary = "sk-canary-argv-7Hq2Zt9W"
    monkeypatch.setattr(
        sys, "argv", ["ableaudit", "audit", "--base-url", f"http://u:{canary}@127.0.0.1:9/v1"]
    )
    run_dbt(["seed", "--select", "domains"], warehouse)
    results = json.loads((Path(os.environ["DBT_TARGET_PATH"]) / "run_results.json").read_text())
    assert results["args"]["invocation_command"].startswith("dbt seed --select domains")
    written = [Path(os.environ["DBT_LOG_PATH"]) / "dbt.log"]
    written += Path(os.environ["DBT_TARGET_PATH"]).glob("*.json")
    for path in written:
        assert canary not in path.read_text(errors="replace"), path


def _hold(warehouse, seconds: float) -> subprocess.Popen:
    """Another process holding the warehouse (a second build, a reader), from when it returns."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(warehouse)!r}, read_only=True); "
            f"print('held', flush=True); time.sleep({seconds})",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_dbt_waits_for_a_warehouse_taken_after_the_check_then_names_its_holder(
    warehouse, monkeypatch
):
    """dbt-duckdb opens the file itself and fails at once on DuckDB's lock: a process taking the
    file between the wait and dbt's own open (a second `ableaudit build`) makes the run wait and
    go again, like every other writer, and after the wait the error names the process."""
    import time

    from ableaudit.dbt import runner
    from ableaudit.warehouse import connect
    from ableaudit.warehouse.connection import WarehouseBusy

    connect(warehouse).close()
    monkeypatch.setattr(runner, "wait_until_free", lambda *a, **k: None)  # the race, every time
    holder = _hold(warehouse, 6)
    started = time.monotonic()
    try:
        run_dbt(["seed", "--select", "domains"], warehouse)
    finally:
        holder.kill()
    assert time.monotonic() - started > 3
    holder = _hold(warehouse, 120)
    monkeypatch.setattr(runner, "WAIT_S", 2.0)
    try:
        with pytest.raises(WarehouseBusy, match=rf"held by process {holder.pid} \(.*python"):
            run_dbt(["seed", "--select", "domains"], warehouse)
    finally:
        holder.kill()


@pytest.mark.parametrize(
    "relative",
    [
        "quote's dir/o'brien.duckdb",
        "semi;colon/wh;drop.duckdb",
        'dq"x/a"b.duckdb',
        "h#sh/w#1.duckdb",
        "space dir/ünïcødé wh.duckdb",
    ],
)
def test_dbt_builds_at_a_path_with_quotes_semicolons_hashes_spaces_and_accents(tmp_path, relative):
    """A path is data: the plugin attaches the file under a fixed database name, so neither its
    folder nor its name reaches dbt's SQL (which pastes the database name into queries)."""
    wh = tmp_path / relative
    run_dbt(["seed", "--select", "domains"], wh)
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("select count(*) from main.domains").fetchone()[0] > 0
        assert con.execute("select count(*) from raw.generations").fetchone()[0] == 0
    finally:
        con.close()
    assert sorted(p.name for p in wh.parent.iterdir()) == [wh.name]  # its log went in


def test_commands_in_a_read_only_folder_exit_with_one_message(tmp_path):
    """`build --force`, `publish` and `report` on a built warehouse whose folder this user
    cannot write: status 2, one message naming the file and the fix, no traceback."""
    import os
    import shutil
    from pathlib import Path

    folder = tmp_path / "ro"
    wh = folder / "ableaudit.duckdb"
    folder.mkdir()
    duckdb.connect(str(wh)).close()  # an audit or an import creates it; build reads it
    cli = [sys.executable, "-m", "ableaudit.cli"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    built = subprocess.run(
        [*cli, "build", "--warehouse", str(wh)], capture_output=True, text=True, env=env
    )
    assert built.returncode == 0, built.stderr[-3000:]
    bound = []  # root ignores file permissions: drop that capability for the commands
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root ignores file permissions and setpriv is missing")
        bound = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        for command in (["build", "--force"], ["publish"], ["report"]):
            done = subprocess.run(
                [*bound, *cli, *command, "--warehouse", str(wh)],
                capture_output=True,
                text=True,
                env=env,
            )
            assert done.returncode == 2, (command, done.stderr[-3000:])
            assert "Traceback" not in done.stderr, (command, done.stderr[-3000:])
            assert "ableaudit: error: cannot write" in done.stderr, (command, done.stderr)
            assert "read-only for this user" in done.stderr, (command, done.stderr)
    finally:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
