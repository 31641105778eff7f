"""Opening the warehouse: every failure is named for what it is, with its fix, never as a
file "held by another process" unless one is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ableaudit.warehouse import connect
from ableaudit.warehouse.connection import WarehouseError, io_failure

HELD = "held by"
ROOT = Path(__file__).resolve().parents[3]


def _refused(path, read_only=False) -> str:
    with pytest.raises(WarehouseError) as err:
        connect(path, read_only=read_only, wait_s=0.5)
    assert HELD not in str(err.value)
    return str(err.value)


def test_a_folder_given_as_the_warehouse(tmp_path):
    folder = tmp_path / "wh.duckdb"
    folder.mkdir()
    assert f"{folder} is a folder" in _refused(folder)
    assert str(folder / "ableaudit.duckdb") in _refused(folder, read_only=True)


def test_a_csv_given_as_the_warehouse_is_left_as_it_is(tmp_path):
    csv = tmp_path / "answers.csv"
    csv.write_text("model_id,response_text\nm,A.\n")
    message = _refused(csv)
    assert f"{csv} is not a DuckDB database" in message and "a CSV" in message
    assert csv.read_text() == "model_id,response_text\nm,A.\n"


def test_a_truncated_file(tmp_path):
    good = tmp_path / "good.duckdb"
    con = duckdb.connect(str(good))
    con.execute("create table t as select range as i from range(200000)")
    con.close()
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    message = _refused(cut)
    assert "is damaged" in message and "Restore it from a backup" in message


def test_a_stale_wal_beside_a_restored_file(tmp_path):
    wh = tmp_path / "ableaudit.duckdb"
    connect(wh).close()
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("set checkpoint_threshold = '1TB'")
    con.execute("create table u as select 1 as i")
    shutil.copy(f"{other}.wal", f"{wh}.wal")  # the .wal of another file, as a restore leaves it
    con.close()
    message = _refused(wh)
    assert f"{wh}.wal does not match it" in message and "Move ableaudit.duckdb.wal aside" in message


def _without_root_override() -> list[str]:
    """The command prefix that runs a process bound by file permissions (root is not)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root ignores file permissions and setpriv is missing")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def test_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    wh = folder / "ableaudit.duckdb"
    folder.chmod(0o555)
    probe = (
        "import sys; from ableaudit.warehouse import connect\n"
        "try:\n    connect(sys.argv[1], wait_s=0.5)\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n"
    )
    try:
        out = subprocess.run(
            [*_without_root_override(), sys.executable, "-c", probe, str(wh)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        folder.chmod(0o755)
    assert out.stdout.startswith("WarehouseError cannot write the warehouse"), out.stderr
    assert "read-only for this user" in out.stdout and HELD not in out.stdout


def test_write_failures_are_named_with_their_fix():
    denied = PermissionError(13, "Permission denied", "/srv/ro/published.duckdb")
    assert io_failure(denied).startswith(
        "cannot write /srv/ro/published.duckdb (permission denied)"
    )
    duck = duckdb.IOException(
        'IO Error: Cannot open file "/srv/ro/x.duckdb": Read-only file system'
    )
    assert "cannot write /srv/ro/x.duckdb (read-only file system)" in io_failure(duck)
    assert io_failure(ConnectionResetError(104, "reset")) is None
