"""Preflight from outside: the `ableaudit` command in a subprocess stops a bad config before it
imports Prefect or dbt, and the one-line endpoint audit runs end to end against a local
OpenAI-compatible server (tests.fixtures.openai_server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ableaudit.cli.main import main
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer, closed_port_url

ROOT = Path(__file__).resolve().parents[2]

# Runs the command in a fresh interpreter, then prints which heavy packages it imported.
PROBE = """
import sys
from ableaudit.cli.main import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("prefect", "dbt", "torch", "xllamacpp", "openai") if m in sys.modules)
print("imported:", ",".join(heavy) or "none")
sys.exit(code)
"""


def _run(*argv: str, probe: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL",)}
    cmd = (
        [sys.executable, "-c", PROBE, *argv]
        if probe
        else [sys.executable, "-m", "ableaudit.cli", *argv]
    )
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "config, fragment",
    [
        (
            "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2, batchsize: 4}\n",
            "did you mean 'batch_size'",
        ),
        (
            "targets:\n  - {name: m, backend: llama-cpp, model: builtin:smollm2}\n",
            "did you mean 'llamacpp'",
        ),
        (
            "targets:\n  - {name: m, backend: llamacpp, model: /nowhere/m.gguf}\n",
            "GGUF file '/nowhere/m.gguf' does not exist",
        ),
        (
            "targets:\n  - {name: m, backend: openai, model: m, base_url: '{closed}'}\n",
            "target 'm': cannot reach {closed}",
        ),
    ],
    ids=["typo key", "unknown backend", "missing GGUF", "unreachable base_url"],
)
def test_a_bad_config_stops_before_prefect_or_dbt_is_imported(config, fragment, tmp_path):
    closed = closed_port_url()
    path = tmp_path / "audit.yaml"
    path.write_text(config.replace("{closed}", closed))
    done = _run("audit", "--config", str(path), "--warehouse", str(tmp_path / "wh.duckdb"))
    assert done.returncode == 2, done.stderr
    assert fragment.replace("{closed}", closed) in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.strip() == "imported: none"
    assert not (tmp_path / "wh.duckdb").exists()


def test_the_installed_entry_point_reports_an_unreachable_endpoint(tmp_path):
    closed = closed_port_url()
    done = _run("audit", "--model", "my-model", "--base-url", closed, probe=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("ableaudit: error: audit config ")
    assert f"target 'my-model': cannot reach {closed}" in done.stderr
    assert "`vllm serve my-model --port" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_one_line_endpoint_audit_runs_end_to_end(tmp_path, capsys):
    """`ableaudit audit --base-url URL --model NAME`: no config file; the generated config is the
    one that ran, and every prompt of the subset landed from the server."""
    server = FakeOpenAIServer()
    try:
        wh = tmp_path / "wh.duckdb"
        saved = tmp_path / "endpoint.yaml"
        argv = ["audit", "--model", SERVED_ID, "--base-url", server.base_url, "--subset", "1"]
        code = main([*argv, "--no-build", "--warehouse", str(wh), "--print-config", str(saved)])
        assert code == 0, capsys.readouterr().err
    finally:
        server.close()
    con = duckdb.connect(str(wh), read_only=True)
    try:
        rows = con.execute(
            "select target, arm, status, count(*) from raw.generations group by all"
        ).fetchall()
        config_json = con.execute("select config_json from raw.runs").fetchone()[0]
    finally:
        con.close()
    # 6 domains x 1 neutral query x (the neutral prompt + 9 disability prompts)
    assert rows == [(SERVED_ID, "baseline", "ok", 60)]
    assert len(server.payloads) == 60 and all(p["temperature"] == 0.1 for p in server.payloads)
    assert "per_domain" in saved.read_text() and SERVED_ID in config_json
