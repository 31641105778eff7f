"""Stopping `ableaudit audit`, run as a command against a slow local OpenAI-compatible server
(tests.fixtures.openai_server): Ctrl-C and SIGTERM end it within seconds with the answers that
finished landed, the run 'interrupted', a resume hint and exit status 130 or 143; running the
same command again asks only for the rest. Progress moves per answer. A killed audit leaves no
Prefect server behind, and one that ends leaves none either."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil
import pytest
import yaml

from ableaudit.warehouse import connect
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer

pytestmark = [pytest.mark.slow, pytest.mark.long]

N_PROMPTS = 6 * 2  # per_domain 1 over 6 domains: neutral + one disability
DELAY_S = 4.0  # per request: the whole audit needs 6 rounds of 2, about 24 s of generation
STOPS_WITHIN_S = 12.0  # the rest of the generation alone would take 16 s or more
START_TIMEOUT_S = 600  # dbt prepares the prompts and Prefect's server starts on 2 busy cores
SERVER_MODULE = "ableaudit.audit.prefect_server"


@pytest.fixture
def server():
    s = FakeOpenAIServer()
    yield s
    s.close()


def _config(tmp_path: Path, server: FakeOpenAIServer) -> Path:
    cfg = {
        "name": "stopping",
        "build": False,
        "subset": {"per_domain": 1, "disabilities": ["hearing"]},
        "targets": [
            {
                "name": "one",
                "backend": "openai",
                "model": SERVED_ID,
                "base_url": server.base_url,
                "batch_size": 2,
                "api_key_env": "ABLEAUDIT_TEST_NO_SUCH_KEY",
                "options": {"max_retries": 0},
                "decoding": {"max_new_tokens": 16},
            }
        ],
    }
    path = tmp_path / "stopping.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _start(tmp_path: Path, args: list[str]) -> subprocess.Popen[str]:
    """`ableaudit audit ...` as its own process group, as a shell starts a foreground job."""
    return subprocess.Popen(
        [sys.executable, "-m", "ableaudit.cli", "audit", *args],
        stdout=open(tmp_path / "stdout.txt", "w"),
        stderr=open(tmp_path / "stderr.txt", "w"),
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _servers_of(pid: int) -> list[psutil.Process]:
    """The Prefect servers among a process's descendants."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if SERVER_MODULE in " ".join(child.cmdline()) or "uvicorn" in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def _gone(proc: psutil.Process, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def _wait_until(check, proc: subprocess.Popen, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if proc.poll() is not None:
            pytest.fail(f"the audit ended (status {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {timeout_s} s")
        time.sleep(0.05)


def _query(wh: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _stop_and_resume(tmp_path: Path, server: FakeOpenAIServer, signum: int) -> None:
    wh = tmp_path / "wh" / "stopping.duckdb"
    args = ["--config", str(_config(tmp_path, server)), "--warehouse", str(wh)]
    server.delay_s = DELAY_S
    audit = _start(tmp_path, args)
    prefect_servers: set[psutil.Process] = set()

    def answered() -> bool:
        prefect_servers.update(_servers_of(audit.pid))
        return len(server.spans) >= 2

    _wait_until(answered, audit, START_TIMEOUT_S, "answer")
    time.sleep(0.5)  # the client reads the two replies
    answered_before = {p["messages"][-1]["content"] for p in server.payloads[:2]}
    sent = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(audit.pid, signum)  # Ctrl-C reaches the terminal's whole foreground group
    else:
        audit.send_signal(signum)
    try:
        status = audit.wait(timeout=STOPS_WITHIN_S)
    except subprocess.TimeoutExpired:
        audit.kill()
        pytest.fail(f"the audit did not stop within {STOPS_WITHIN_S} s of {signum!r}")
    took = time.monotonic() - sent
    out = (tmp_path / "stdout.txt").read_text()
    err = (tmp_path / "stderr.txt").read_text()
    assert status == 128 + signum, (took, out[-2000:], err[-4000:])
    assert prefect_servers and all(_gone(p, 10) for p in prefect_servers)

    # exactly the finished answers landed, the run is 'interrupted'
    rows = _query(wh, "select status, prompt_text from raw.generations")
    assert {s for s, _ in rows} == {"ok"}
    landed = [t for _, t in rows]
    assert len(landed) == len(set(landed))
    assert answered_before <= set(landed)
    asked_first = {p["messages"][-1]["content"] for p in server.payloads}
    assert set(landed) <= asked_first and len(landed) < N_PROMPTS
    assert _query(wh, "select status from raw.runs") == [("interrupted",)]

    # one message: how many landed, what is left, the command to resume
    assert f"{len(landed)} answers of this run landed" in out
    assert f"{N_PROMPTS - len(landed)} of {N_PROMPTS} planned answers still to generate" in out
    resume = "ableaudit audit " + " ".join(args)
    assert resume in out

    # progress moved per answer: landing batches are 2, the bar showed odd counts too
    counts = {int(n) for n in re.findall(rf"(\d+)/{N_PROMPTS} \[", err)}
    assert counts & {1, 3}, err[-3000:]
    assert re.search(r"answer/s|s/answer", err), err[-3000:]  # the bar's pace

    # the same command resumes: only the rest is asked for, every prompt ends with one answer
    server.delay_s = 0.0
    asked = len(server.payloads)
    again = subprocess.run(
        [sys.executable, "-m", "ableaudit.cli", "audit", *args],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert len(server.payloads) - asked == N_PROMPTS - len(landed)
    assert not set(landed) & {p["messages"][-1]["content"] for p in server.payloads[asked:]}
    per_prompt = _query(wh, "select prompt_id, count(*) from raw.generations group by prompt_id")
    assert len(per_prompt) == N_PROMPTS and {n for _, n in per_prompt} == {1}
    assert [s for (s,) in _query(wh, "select status from raw.runs order by started_at")] == [
        "interrupted",
        "completed",
    ]
    # the last lines name where the results are
    assert f"{wh}" in again.stdout and "Parquet files of the marts" in again.stdout


def test_ctrl_c_stops_within_seconds_and_the_same_command_resumes(tmp_path, server):
    _stop_and_resume(tmp_path, server, signal.SIGINT)


def test_sigterm_stops_within_seconds_and_the_same_command_resumes(tmp_path, server):
    _stop_and_resume(tmp_path, server, signal.SIGTERM)


def test_a_killed_audit_leaves_no_prefect_server(tmp_path, server):
    """SIGKILL gives the audit no chance to stop its server: the server goes by itself."""
    wh = tmp_path / "wh" / "killed.duckdb"
    audit = _start(tmp_path, ["--config", str(_config(tmp_path, server)), "--warehouse", str(wh)])
    found: list[psutil.Process] = []

    def server_up() -> bool:
        found[:] = _servers_of(audit.pid)
        return bool(found) and any(
            c.status == psutil.CONN_LISTEN for p in found for c in p.net_connections()
        )

    _wait_until(server_up, audit, START_TIMEOUT_S, "Prefect server")
    audit.kill()
    audit.wait(timeout=10)
    assert all(_gone(p, 10) for p in found), [p.pid for p in found]


def _consistent(wh: Path) -> None:
    """The warehouse opens (DuckDB replays its log) and every landed answer is whole and once."""
    rows = _query(wh, "select status, prompt_id from raw.generations")
    assert {s for s, _ in rows} <= {"ok"}
    assert len({p for _, p in rows}) == len(rows)


def _hold(wh: Path) -> subprocess.Popen[str]:
    """Another process holding the warehouse (a reader), from when it returns: a write to it
    waits, so a stop that lands the last answers and marks the run lingers until it goes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time\n"
            "while True:\n"
            "    try:\n"
            "        c = duckdb.connect(sys.argv[1], read_only=True)\n"
            "        break\n"
            "    except duckdb.IOException:\n"
            "        time.sleep(0.05)\n"
            "print('held', flush=True)\n"
            "time.sleep(3600)\n",
            str(wh),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def _ended(proc: subprocess.Popen, within_s: float, what: str) -> int:
    try:
        return proc.wait(timeout=within_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the command did not end within {within_s} s of {what}")


def _output(tmp_path: Path) -> str:
    return (tmp_path / "stdout.txt").read_text() + (tmp_path / "stderr.txt").read_text()


ENDS_WITHIN_S = 5.0
"""How soon a second signal ends the command: it writes one line and ends, within a second
(``stopping.MAIN_THREAD_GRACE_S``) when its main thread is busy in native code."""


def test_a_second_ctrl_c_during_generation_ends_at_once_with_130(tmp_path, server):
    """The first Ctrl-C stops the generation and lands what finished; a reader holding the
    warehouse keeps that landing waiting, so the second Ctrl-C, sent once the command has said
    it is stopping, always comes while the first stop is under way. Then the warehouse opens
    with every landed answer whole and once, and the same command resumes the run."""
    wh = tmp_path / "wh" / "twice.duckdb"
    args = ["--config", str(_config(tmp_path, server)), "--warehouse", str(wh)]
    server.delay_s = DELAY_S
    audit = _start(tmp_path, args)
    found: list[psutil.Process] = []

    def answered() -> bool:
        found[:] = found or _servers_of(audit.pid)
        return len(server.spans) >= 2

    _wait_until(answered, audit, START_TIMEOUT_S, "answer")
    holder = _hold(wh)
    try:
        os.killpg(audit.pid, signal.SIGINT)
        _wait_until(
            lambda: "stopping; the answers that finished are being landed" in _output(tmp_path),
            audit,
            60,
            "word that the first Ctrl-C is stopping the audit",
        )
        sent = time.monotonic()
        os.killpg(audit.pid, signal.SIGINT)
        status = _ended(audit, ENDS_WITHIN_S, "the second Ctrl-C")
        took = time.monotonic() - sent
    finally:
        holder.kill()
        holder.wait()
    out = _output(tmp_path)
    print(f"the second Ctrl-C ended the audit in {took:.2f} s")  # shown with -rP
    assert status == 130, (took, out[-3000:])
    assert "Traceback" not in out, out[-3000:]
    assert out.count("ableaudit: Ctrl-C (SIGINT) again: stopped at once.") == 1, out[-3000:]
    assert "Resume with the same command" not in out  # the first stop never finished
    assert found and all(_gone(p, 10) for p in found)
    _consistent(wh)
    landed = len(_query(wh, "select 1 from raw.generations"))
    assert landed < N_PROMPTS

    server.delay_s = 0.0
    asked = len(server.payloads)
    again = subprocess.run(
        [sys.executable, "-m", "ableaudit.cli", "audit", *args],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert len(server.payloads) - asked == N_PROMPTS - landed
    per_prompt = _query(wh, "select prompt_id, count(*) from raw.generations group by prompt_id")
    assert len(per_prompt) == N_PROMPTS and {n for _, n in per_prompt} == {1}
    assert [s for (s,) in _query(wh, "select status from raw.runs order by started_at")] == [
        "interrupted",
        "completed",
    ]


def _to_main_thread(pid: int, signum: int) -> None:
    """A signal for the process's main thread (its thread id is the process id), where the
    kernel puts a process's signal when it can. Two sent to one thread arrive in the order of
    their numbers; two left to the process may be taken by two threads in either order."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "tgkill"):
        pytest.skip("this C library has no tgkill (glibc 2.30 or newer has)")
    if libc.tgkill(pid, pid, signum) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill {pid} {signum}")


def test_sigterm_after_ctrl_c_during_a_build_ends_at_once_with_143(tmp_path):
    """Ctrl-C, then SIGTERM, both sent while the build is paused (SIGSTOP) and taken in that
    order when it goes on (SIGCONT): the second always comes while the first is stopping dbt,
    however loaded the machine. Then the warehouse opens and the next build succeeds."""
    wh = tmp_path / "wh" / "built.duckdb"
    wh.parent.mkdir()
    connect(wh).close()  # a new warehouse: `ableaudit build` builds only one that exists
    build = subprocess.Popen(  # -v: dbt's lines say when a node has started
        [sys.executable, "-m", "ableaudit.cli", "build", "-v", "--warehouse", str(wh)],
        stdout=open(tmp_path / "stdout.txt", "w"),
        stderr=open(tmp_path / "stderr.txt", "w"),
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )

    def building() -> bool:
        return " START " in (tmp_path / "stdout.txt").read_text()

    _wait_until(building, build, START_TIMEOUT_S, "dbt node started")
    time.sleep(2)
    os.killpg(build.pid, signal.SIGSTOP)
    paused = psutil.Process(build.pid)
    deadline = time.monotonic() + 10
    while paused.status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert paused.status() == psutil.STATUS_STOPPED
    _to_main_thread(build.pid, signal.SIGINT)
    _to_main_thread(build.pid, signal.SIGTERM)
    sent = time.monotonic()
    os.killpg(build.pid, signal.SIGCONT)
    status = _ended(build, ENDS_WITHIN_S, "Ctrl-C and SIGTERM")
    took = time.monotonic() - sent
    out = _output(tmp_path)
    print(f"the build ended {took:.2f} s after it went on")  # shown with -rP
    assert status == 143, (took, out[-3000:])
    assert "Traceback" not in out, out[-3000:]
    assert out.count("ableaudit: SIGTERM again: stopped at once.") == 1, out[-3000:]
    assert "stopped by Ctrl-C" not in out  # the first stop never finished
    _consistent(wh)
    again = subprocess.run(
        [sys.executable, "-m", "ableaudit.cli", "build", "--warehouse", str(wh)],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert f"Built {wh}" in again.stdout
