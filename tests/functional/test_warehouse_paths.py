"""A warehouse path is data: quotes, semicolons, spaces, ``#`` and accents in its folder and file
names work through every command, and a second build waits for the first.

A warehouse at the nastiest path (every such character in the folder and in the file name) is
imported into and built in subprocesses, as a user runs it, by two `ableaudit build` started
together; a copy of it takes `publish`, `report`, the headline, `history`, `gate` and `forget`
with its rebuild. A copy at each other path takes the commands that need no dbt build (an
import, a publish, the report, the headline, the history, a forget); test_dbt_runner.py builds
at each of those paths. A ``?`` is DuckDB's own syntax in a database path (its options start
there): such a path is refused with one message before anything is written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import ableaudit.cli.main  # noqa: F401 - the module, reached through sys.modules below
from ableaudit.report.headline_table import headline

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

CLI = sys.modules["ableaudit.cli.main"]
ROOT = Path(__file__).resolve().parents[2]

NASTIEST = "q'u\"o;t e ü#/o'b\"r;i e#n ü.duckdb"
PATHS = [
    "quote's dir/o'brien.duckdb",
    "semi;colon/wh;drop.duckdb",
    'dq"x/a"b.duckdb',
    "h#sh/w#1.duckdb",
    "space dir/ünïcødé wh.duckdb",
]

HEADER = "model_id,query_id,disability,response_text\n"
FIRST = HEADER + "gpt-x,edu_001,,Make a weekly schedule.\ngpt-x,edu_001,hearing,Use captions.\n"
SECOND = HEADER + "gpt-y,edu_001,,Plan the week.\ngpt-y,edu_001,hearing,Turn on captions.\n"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ableaudit.cli", *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )


def _published(wh: Path) -> Path:
    return wh.parent / "published" / wh.name


def _count(path: Path, sql: str) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def _rows(path: Path, model: str) -> int:
    """The model's answers in raw.generations of a warehouse or a published copy."""
    return _count(path, f"select count(*) from raw.generations where model_id = '{model}'")


def _held(wh: Path) -> bool:
    """Whether another process holds the warehouse (DuckDB's lock)."""
    try:
        duckdb.connect(str(wh), read_only=True).close()
    except duckdb.IOException as err:
        return "lock" in str(err).lower()
    return False


def _ok(done: subprocess.CompletedProcess, what: str) -> str:
    assert done.returncode == 0, (what, done.stdout[-2000:], done.stderr[-3000:])
    assert "Traceback" not in done.stderr, (what, done.stderr[-3000:])
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def nastiest(tmp_path_factory: pytest.TempPathFactory, dbt_env) -> dict:
    """The warehouse at the nastiest path, its answers imported, then built by two `ableaudit
    build` started together: the second starts while the first holds the file."""
    wh = tmp_path_factory.mktemp("paths") / NASTIEST
    answers = wh.parent.parent / "first.csv"
    answers.write_text(FIRST)
    imported = _cli("import", "responses", str(answers), "--warehouse", str(wh))
    first = subprocess.Popen(
        [sys.executable, "-m", "ableaudit.cli", "build", "--warehouse", str(wh)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    deadline = time.monotonic() + 300
    held = False
    while not held and first.poll() is None and time.monotonic() < deadline:
        held = _held(wh)
        time.sleep(0 if held else 0.2)
    second = _cli("build", "--warehouse", str(wh))
    out, err = first.communicate(timeout=600)
    return {
        "wh": wh,
        "imported": imported,
        "held": held,
        "first": subprocess.CompletedProcess(first.args, first.returncode, out, err),
        "second": second,
    }


@pytest.mark.long
def test_the_nastiest_path_is_imported_into_and_built(nastiest):
    wh = nastiest["wh"]
    assert "Landed from" in _ok(nastiest["imported"], "import")
    built = _ok(nastiest["first"], "build")
    assert f"Built {wh}" in built and f"Published {_published(wh)}" in built
    assert _rows(wh, "gpt-x") == 2 and _rows(_published(wh), "gpt-x") == 2
    degradation = "select count(*) from degradation where model_id = 'gpt-x'"
    assert _count(_published(wh), degradation) > 0


def test_a_second_build_waits_for_the_first(nastiest):
    """Started while the first holds the file: it waits (no lock error), then ends 0."""
    assert nastiest["held"], "the first build ended before the second could start beside it"
    second = _ok(nastiest["second"], "second build")
    assert "lock" not in second.lower() and "held by" not in second


def _main(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = CLI.main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.err, (argv, out.err[-3000:])
    return code, out.out, out.err


def _run(capsys: pytest.CaptureFixture, *argv: str) -> str:
    code, out, err = _main(capsys, *argv)
    assert code == 0, (argv, out[-2000:], err[-3000:])
    return out + err


def _copy(nastiest: dict, wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The built warehouse at ``wh``, with the record of its prompts (an import builds none)."""
    wh.parent.mkdir()
    shutil.copy(nastiest["wh"], wh)
    stamp = nastiest["wh"].with_name(nastiest["wh"].name + ".prompts.json")
    shutil.copy(stamp, wh.with_name(wh.name + ".prompts.json"))
    monkeypatch.setenv("ABLEAUDIT_WAREHOUSE", str(wh))  # main() sets it; restored after


@pytest.mark.long
def test_every_command_at_the_nastiest_path(nastiest, tmp_path, capsys, monkeypatch):
    wh = tmp_path / NASTIEST
    _copy(nastiest, wh, monkeypatch)
    at = ("--warehouse", str(wh))
    published = _published(wh)
    assert str(published) in _run(capsys, "publish", *at)
    index = published.parent / published.stem / "report" / "index.html"
    assert f"open {index} in a browser" in _run(capsys, "report", *at) and index.is_file()
    assert "gpt-x" in headline(published)
    landing = _count(wh, "select landing_id from raw.landings where kind = 'import-responses'")
    assert landing in _run(capsys, "history", "--json", *at)
    # the gates' own dbt run reads the warehouse at this path; an import makes no audit run to
    # judge, which the gate says in one line
    code, _, err = _main(capsys, "gate", "--gates", str(ROOT / "configs/gates.example.yml"), *at)
    assert code == 2 and "gate_results has no verdict" in err and "holds a run" in err, err
    assert f"Forgot landing {landing}" in _run(capsys, "forget", landing, "--yes", *at)
    assert _rows(wh, "gpt-x") == 0 and _rows(published, "gpt-x") == 0
    assert "gpt-x" not in headline(published)


@pytest.mark.parametrize("relative", PATHS)
def test_the_commands_that_read_and_land_at_each_path(
    nastiest, tmp_path, capsys, monkeypatch, relative
):
    wh = tmp_path / relative
    _copy(nastiest, wh, monkeypatch)
    answers = tmp_path / "second.csv"
    answers.write_text(SECOND)
    at = ("--warehouse", str(wh))
    assert "2 new" in _run(capsys, "import", "responses", str(answers), *at)
    published = _published(wh)
    _run(capsys, "publish", *at)
    assert _rows(published, "gpt-y") == 2 and _rows(published, "gpt-x") == 2
    assert (published.parent / published.stem / "parquet" / "degradation.parquet").is_file()
    assert f"Read {published} (read-only)" in _run(capsys, "report", *at)
    assert "gpt-x" in headline(published)
    landing = _count(wh, "select landing_id from raw.landings where source like '%second.csv'")
    assert landing in _run(capsys, "history", *at)
    _run(capsys, "forget", landing, "--yes", "--no-build", *at)
    _run(capsys, "publish", *at)
    assert _rows(wh, "gpt-y") == 0 and _rows(published, "gpt-y") == 0
    assert _rows(published, "gpt-x") == 2


@pytest.mark.parametrize("command", [["build"], ["publish"], ["report"], ["history"]])
def test_a_path_with_a_question_mark_is_refused_before_anything_is_written(
    tmp_path, capsys, monkeypatch, command
):
    wh = tmp_path / "q?h#" / "w?#.duckdb"
    monkeypatch.setenv("ABLEAUDIT_WAREHOUSE", str(tmp_path / "unused.duckdb"))
    capsys.readouterr()
    assert CLI.main([*command, "--warehouse", str(wh)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"the warehouse path {wh} holds a '?'" in err
    assert f"a path without '?', e.g. {tmp_path / 'q_h#' / 'w_#.duckdb'}" in err
    assert list(tmp_path.iterdir()) == []
