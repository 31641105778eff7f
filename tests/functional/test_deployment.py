"""The deployment path: `prefect deployment run audit/audit`, served by a process worker.

Starts a real Prefect server on 127.0.0.1, registers the deployments of
prefect.yaml, triggers a run with the CLI as a user would, and lets a worker
execute it once.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest

from ableaudit import PROJECT_ROOT

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
CONFIG = PROJECT_ROOT / "tests" / "e2e_configs" / "tiny_nojudge.yaml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prefect(env: dict, *args: str, timeout: float = 300) -> str:
    out = subprocess.run(
        [str(BIN / "prefect"), "--no-prompt", *args],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, (
        f"prefect {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    )
    return out.stdout


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    env = dict(
        os.environ,
        PREFECT_HOME=str(home),
        PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_UI_ENABLED="false",
        ABLEAUDIT_ROOT=str(PROJECT_ROOT),
        PYTHONUNBUFFERED="1",
    )
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    "prefect server did not start:\n" + (home / "server.log").read_text()[-3000:]
                )
            time.sleep(1)
        yield env
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


def test_deployment_run_audit_audit(server, tmp_path):
    env = dict(server, ABLEAUDIT_REGARD_MODEL=str(tmp_path / "absent"))
    wh = tmp_path / "deployed.duckdb"
    _prefect(env, "work-pool", "create", "ableaudit", "--type", "process", "--overwrite")
    out = _prefect(env, "deploy", "--all")
    assert "audit/audit" in out
    run_out = _prefect(
        env,
        "deployment",
        "run",
        "audit/audit",
        "--param",
        f"config={CONFIG}",
        "--param",
        f"warehouse={wh}",
    )
    assert "Created flow run" in run_out
    worker = subprocess.run(
        [str(BIN / "prefect"), "worker", "start", "--pool", "ableaudit", "--run-once"],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert worker.returncode == 0, worker.stdout[-4000:] + worker.stderr[-4000:]
    runs = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-c",
                (
                    "import asyncio, json\n"
                    "from prefect.client.orchestration import get_client\n"
                    "async def main():\n"
                    "    async with get_client() as c:\n"
                    "        runs = await c.read_flow_runs()\n"
                    "        print(json.dumps([[r.name, r.state.type.value] for r in runs]))\n"
                    "asyncio.run(main())\n"
                ),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert runs and all(state == "COMPLETED" for _, state in runs), runs
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("select count(*) from raw.generations").fetchone()[0] == 18
        assert (
            con.execute("select count(*) from degradation where metric = 'vader'").fetchone()[0] > 0
        )
    finally:
        con.close()
    assert (wh.parent / "published" / wh.name).is_file()
