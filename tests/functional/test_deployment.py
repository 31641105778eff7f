"""The deployment path: `prefect deployment run audit/audit`, served by a process worker.

Offline, prefect.yaml goes through Prefect's own loader: every deployment's
schedules, entry point and parameters are valid. Then a real Prefect server on
127.0.0.1 registers the deployments of prefect.yaml (the re-audit with its
schedule), a run is triggered with the CLI as a user would, and a worker
executes it once.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
import yaml

from ableaudit import PROJECT_ROOT
from ableaudit.config import load_config
from ableaudit.gates import load_gates
from ableaudit.queryset.config import load_build_config

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


def _deployments() -> dict[str, dict]:
    """prefect.yaml's deployments as `prefect deploy` reads them (its model refuses a bad file)."""
    from prefect.cli.deploy._models import PrefectYamlModel

    raw = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())
    model = PrefectYamlModel.model_validate(raw)
    return {d.name: d.model_dump(exclude_unset=True, mode="json") for d in model.deployments}


def test_every_deployment_has_a_loadable_flow_valid_parameters_and_schedules():
    from prefect.cli.deploy._schedules import _schedule_config_to_deployment_schedule
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.flows import load_flow_from_entrypoint

    deployments = _deployments()
    assert set(deployments) == {
        "audit",
        "reaudit",
        "score",
        "train-detector",
        "train-dpo",
        "build-queryset",
    }
    for d in deployments.values():
        flow = load_flow_from_entrypoint(str(PROJECT_ROOT / d["entrypoint"]))
        flow.validate_parameters(d.get("parameters", {}))  # raises on a parameter the flow lacks
        for schedule in d.get("schedules") or []:
            DeploymentScheduleCreate(**_schedule_config_to_deployment_schedule(schedule))
        config = d.get("parameters", {}).get("config")
        if config and flow.name == "build-queryset":
            load_build_config(PROJECT_ROOT / config)
        elif config:
            load_config(PROJECT_ROOT / config)


def test_the_reaudit_runs_daily_at_six_utc_on_the_hosted_endpoint_config():
    from prefect.cli.deploy._schedules import _schedule_config_to_deployment_schedule
    from prefect.server.schemas.schedules import CronSchedule

    reaudit = _deployments()["reaudit"]
    assert reaudit["entrypoint"] == "flows/audit.py:audit"
    (schedule,) = [_schedule_config_to_deployment_schedule(s) for s in reaudit["schedules"]]
    assert schedule["active"] is False  # registered paused: it calls a paid API
    cron = schedule["schedule"]
    assert (cron.cron, cron.timezone) == ("0 6 * * *", "UTC")
    start = datetime(2026, 3, 28, 12, tzinfo=UTC)
    dates = asyncio.run(CronSchedule(cron=cron.cron, timezone="UTC").get_dates(n=3, start=start))
    assert [d.isoformat() for d in dates] == [
        "2026-03-29T06:00:00+00:00",
        "2026-03-30T06:00:00+00:00",
        "2026-03-31T06:00:00+00:00",
    ]
    cfg = load_config(PROJECT_ROOT / reaudit["parameters"]["config"])
    assert cfg.reask == "each_run" and cfg.alerts is not None
    rules = load_gates(cfg.gates_path(PROJECT_ROOT / reaudit["parameters"]["config"]))
    assert {r.kind for r in rules} == {"no_regression", "degradation_max"}  # no judge needed
    assert all(t.backend == "openai" and t.api_key_env for t in cfg.targets)


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


@pytest.mark.slow
def test_deployment_run_audit_audit(server, tmp_path):
    env = dict(server, ABLEAUDIT_REGARD_MODEL=str(tmp_path / "absent"))
    wh = tmp_path / "deployed.duckdb"
    _prefect(env, "work-pool", "create", "ableaudit", "--type", "process", "--overwrite")
    out = _prefect(env, "deploy", "--all")
    assert "audit/audit" in out and "audit/reaudit" in out
    registered = json.loads(
        _client_query(
            env,
            "d = await c.read_deployment_by_name('audit/reaudit')\n"
            "    print(json.dumps([d.parameters, [[s.schedule.cron, s.schedule.timezone, s.active]"
            " for s in d.schedules]]))",
        )
    )
    assert registered == [
        {"config": "configs/reaudit.example.yaml"},
        [["0 6 * * *", "UTC", False]],
    ]
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
        _client_query(
            env,
            "runs = await c.read_flow_runs()\n"
            "    print(json.dumps([[r.name, r.state.type.value] for r in runs]))",
        )
    )
    assert runs and all(state == "COMPLETED" for _, state in runs), runs
    # the Prefect UI shows the headline on the run: a table and a page with the key figures
    artifacts = json.loads(
        _client_query(
            env,
            "arts = await c.read_artifacts()\n"
            "    print(json.dumps([[a.key, a.type, a.data] for a in arts]))",
        )
    )
    by_key = {key: (kind, data) for key, kind, data in artifacts}
    assert by_key["audit-headline"][0] == "table", artifacts
    table = by_key["audit-headline"][1]
    rows = json.loads(table) if isinstance(table, str) else table
    assert any(r["metric"] == "vader" and int(r["pairs"]) > 0 for r in rows), rows
    kind, page = by_key["audit-report"]
    assert kind == "markdown" and "file://" not in page and "ableaudit view --warehouse" in page
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("select count(*) from raw.generations").fetchone()[0] == 18
        assert (
            con.execute("select count(*) from degradation where metric = 'vader'").fetchone()[0] > 0
        )
    finally:
        con.close()
    assert (wh.parent / "published" / wh.name).is_file()


def _client_query(env: dict, body: str) -> str:
    """Runs ``body`` (Python, with a Prefect client ``c``) against the server of ``env``."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import asyncio, json\n"
            "from prefect.client.orchestration import get_client\n"
            "async def main():\n"
            "  async with get_client() as c:\n"
            f"    {body}\n"
            "asyncio.run(main())\n",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
