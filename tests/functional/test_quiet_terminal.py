"""What a user sees in the terminal: the one-line audit of a served model (the local test
server, tests.fixtures.openai_server), run as the `ableaudit` command, prints its progress,
warnings and summary in at most ~40 lines, with dbt's log in logs/ and not on the terminal;
`-v` prints dbt's lines. On that first audit, the README's gate example gives a verdict."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ableaudit import PROJECT_ROOT
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer
from tests.fixtures.warehouse import read

CLI = [sys.executable, "-c", "import sys; from ableaudit.cli.main import main; sys.exit(main())"]
DBT_LINE = re.compile(r"Running with dbt=|\d+ of \d+ (START|OK|PASS)")


def _run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run([*CLI, *args], capture_output=True, env=env, cwd=cwd, timeout=timeout)
    # decoded here, not with text=True, which would turn a progress bar's \r into a new line
    done.stdout = done.stdout.decode("utf-8", "replace")
    done.stderr = done.stderr.decode("utf-8", "replace")
    return done


def _lines(done: subprocess.CompletedProcess) -> list[str]:
    """The lines a terminal shows: a progress bar redraws its line (``\\r``) in place."""
    return (done.stdout + done.stderr).rstrip("\n").split("\n")


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """A first audit of the local test server, as the README's one-line audit runs it."""
    folder = tmp_path_factory.mktemp("quiet")
    wh = folder / "warehouse" / "ableaudit.duckdb"
    server = FakeOpenAIServer()
    try:
        done = _run(
            ["audit", "--model", SERVED_ID, "--base-url", server.base_url, "--warehouse", str(wh)],
            folder,
        )
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, wh, done


def test_an_audit_prints_its_progress_and_summary_in_at_most_40_lines(audited):
    _, wh, done = audited
    lines = _lines(done)
    assert len(lines) <= 40, "\n".join(lines)
    assert not [line for line in lines if DBT_LINE.search(line)]
    assert not [line for line in lines if "| INFO    |" in line]  # Prefect's run log
    out = done.stdout
    assert "Audit finished" in out and "degraded %" in out  # the summary and the headline
    assert f"{SERVED_ID}:" in done.stderr and "answer" in done.stderr  # the progress bar
    # dbt's lines went to its log file instead
    log = Path(os.environ["DBT_LOG_PATH"]) / "dbt.log"
    assert "Running with dbt=" in log.read_text(errors="replace")
    assert wh.is_file()


def test_verbose_prints_dbt_lines(audited):
    folder, wh, _ = audited
    done = _run(["build", "--force", "-v", "--warehouse", str(wh)], folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len([line for line in _lines(done) if DBT_LINE.search(line)]) > 20


def test_the_readme_gate_example_gives_a_first_audit_a_verdict(audited):
    """The README's `ableaudit gate` example, as written, on a first audit without a judge: a
    verdict of the rules (exit 0: pass; 4: an error rule failed), never a block for evidence
    a first audit cannot have (an earlier run, a judge)."""
    folder, wh, _ = audited
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"`(ableaudit gate [^`]*)`", readme)
    args = shlex.split(example)[1:]
    args = [str(PROJECT_ROOT / a) if a.startswith("configs/") else a for a in args]
    done = _run([*args, "--warehouse", str(wh)], folder)
    assert done.returncode in (0, 4), done.stderr[-3000:]
    assert "Release gate: PASSED" in done.stdout, done.stdout  # the echo server degrades nothing
    assert "BLOCKS" not in done.stdout
    assert (folder / "gates.xml").is_file()


def test_a_first_look_prints_rates_before_the_whole_audit_which_asks_only_the_rest(
    tmp_path: Path,
):
    """`--first-look 2`: two neutral queries audited, built and summarised first; the whole
    audit then lands only the prompts the first look did not ask, each prompt once."""
    wh = tmp_path / "warehouse" / "ableaudit.duckdb"
    server = FakeOpenAIServer()
    try:
        done = _run(
            ["audit", "--model", SERVED_ID, "--base-url", server.base_url, "--subset", "1"]
            + ["--first-look", "2", "--warehouse", str(wh)],
            tmp_path,
        )
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert not [line for line in _lines(done) if "INFO" in line or DBT_LINE.search(line)]
    look = out.index("First look (2 of 6 neutral queries")
    assert out.index("degraded %", look) < out.index("Audit finished") < out.rindex("degraded %")
    per_run = read(
        wh,
        "select count(g.generation_id) as n, count(distinct g.query_id) as q "
        "from raw.runs as r left join raw.generations as g using (run_id) "
        "group by r.run_id, r.started_at order by r.started_at",
    )
    landed = read(wh, "select generation_id from raw.generations")
    # 6 domains x 1 query x (1 neutral + 9 disabilities); the first look's 2 queries first
    assert list(zip(per_run.n, per_run.q)) == [(20, 2), (40, 4)]
    assert len(landed) == landed.generation_id.nunique() == 60
