"""No key reaches a file: an audit against a server that echoes the key it was sent (in a 401
body and in a 500 body), with credentials in a --base-url on the command line and a key in
OPENAI_API_KEY, then a build, a publish and a report. Every file written (the warehouse, the
published copy, the Parquet files, the report, dbt's logs and target/, the Prefect home) is
scanned byte by byte, and every text column of every DuckDB file and Parquet file by SQL, for
the keys and the forms they travel in (URL-encoded, base64, Basic auth's base64 of user:key)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path
from urllib.parse import quote

import duckdb
import pytest

from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer

pytestmark = pytest.mark.slow

URL_KEY = "sk-canaryURL-4fQ9xZ2mB7"
ENV_KEY = "canaryENV-8pL3vT6nK1wR"
USER = "auditor"
TIMEOUT_S = 900
ROOT = Path(__file__).resolve().parents[2]


def _forms() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name, text in {
        "url key": URL_KEY,
        "env key": ENV_KEY,
        "basic user:key": f"{USER}:{URL_KEY}",
    }.items():
        b64 = base64.b64encode(text.encode()).decode()
        for form in (text, quote(text, safe=""), b64, b64.rstrip("=")):
            if "basic" in name and form == text:
                form = URL_KEY  # the pair's plain form is the key itself, checked above
            out[f"{name} as {form[:12]}..."] = form.encode()
    return out


def _echoing(text: str) -> int | None:
    """Which answers the server replaces by an error echoing the key: a sixth 401, a sixth 500."""
    return {0: 401, 1: 500}.get(zlib.crc32(text.encode()) % 6)


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ableaudit.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=TIMEOUT_S,
    )


def _sql_hits(path: Path, needles: dict[str, bytes]) -> list[str]:
    """Every (relation, column) of a DuckDB or Parquet file whose text holds a needle."""
    con = duckdb.connect()
    try:
        if path.suffix == ".parquet":
            relations = {"parquet": f"read_parquet('{path}')"}
        else:
            con.execute(f"attach '{path}' as scanned (read_only)")
            relations = {
                f"{s}.{t}": f'scanned."{s}"."{t}"'
                for s, t in con.execute(
                    "select schema_name, table_name from duckdb_tables() "
                    "where database_name = 'scanned'"
                ).fetchall()
            }
        hits = []
        for name, relation in relations.items():
            columns = [d[0] for d in con.execute(f"select * from {relation} limit 0").description]
            for column in columns:
                text = f'cast("{column}" as varchar)'
                for what, needle in needles.items():
                    n = con.execute(
                        f"select count(*) from {relation} where contains({text}, ?)",
                        [needle.decode()],
                    ).fetchone()[0]
                    if n:
                        hits.append(f"{path}: {name}.{column} holds the {what} ({n} rows)")
        return hits
    finally:
        con.close()


def test_no_key_reaches_any_file_written(tmp_path):
    server = FakeOpenAIServer()
    server.echo_key = _echoing
    port = server.httpd.server_address[1]
    try:
        wh = tmp_path / "wh" / "ableaudit.duckdb"
        env = {
            **os.environ,
            "OPENAI_API_KEY": ENV_KEY,
            "PREFECT_HOME": str(tmp_path / "prefect"),
            "DBT_TARGET_PATH": str(tmp_path / "dbt" / "target"),
            "DBT_LOG_PATH": str(tmp_path / "dbt" / "logs"),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(ROOT),  # this checkout's code, whatever is installed
        }
        started = time.time()
        audit = _cli(
            [
                "audit",
                "--model",
                SERVED_ID,
                "--base-url",
                f"http://{USER}:{URL_KEY}@127.0.0.1:{port}/v1",
                "--base-url",
                f"http://localhost:{port}/v1",  # the second replica is sent OPENAI_API_KEY
                "--subset",
                "1",
                "--warehouse",
                str(wh),
            ],
            env,
            tmp_path,
        )
        assert audit.returncode == 3, audit.stderr[-4000:]  # some requests failed, as planned
        assert "Traceback" not in audit.stderr  # its one message says it, without --debug
        built = _cli(["build", "--warehouse", str(wh), "--force"], env, tmp_path)
        assert built.returncode == 0, built.stderr[-4000:]
    finally:
        server.close()

    # the server was sent both keys and echoed them in errors that landed
    sent = {h.get("authorization", "") for h in server.headers}
    basic = base64.b64encode(f"{USER}:{URL_KEY}".encode()).decode()
    assert {f"Basic {basic}", f"Bearer {ENV_KEY}"} <= sent
    con = duckdb.connect(str(wh), read_only=True)
    errors = con.execute(
        "select error_message from raw.generations where status = 'error'"
    ).fetchall()
    con.close()
    assert errors and all("Incorrect API key provided: " in e for (e,) in errors)
    unmarked = [e for (e,) in errors if "[redacted]" not in e]
    assert not unmarked, unmarked[:3]

    needles = _forms()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    written += [
        p
        for p in ROOT.rglob("*")
        if p.is_file()
        and p.stat().st_mtime >= started
        and not {".git", "__pycache__", "tests"} & set(p.relative_to(ROOT).parts)
    ]
    assert any(p.suffix == ".parquet" for p in written) and any(
        p.suffix == ".html" for p in written
    )
    hits = []
    for path in written:
        data = path.read_bytes()
        hits += [f"{path}: the {what}" for what, needle in needles.items() if needle in data]
        if path.suffix in (".duckdb", ".parquet"):
            hits += _sql_hits(path, needles)
    for stream in (audit.stdout, audit.stderr, built.stdout, built.stderr):
        hits += [f"output: the {w}" for w, n in needles.items() if n.decode() in stream]
    assert not hits, "\n".join(hits)
