"""How an audit ends, against real HTTP servers on 127.0.0.1 (tests.fixtures.openai_server) and the
real `audit` flow without its dbt build: failed requests fail the run with a summary and exit
status 3, a re-run sends only those; and no credential written into the config or the environment
reaches the warehouse, an error message or the terminal; an audit of units whose responses were
imported stops before it sends a request (exit status 2)."""

from __future__ import annotations

import base64
import logging
import secrets

import duckdb
import pytest
import yaml

from ableaudit.audit.flow import audit as audit_flow
from ableaudit.cli.audit import EXIT_INCOMPLETE
from ableaudit.cli.main import EXIT_USAGE, main
from ableaudit.warehouse import connect
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer
from tests.fixtures.warehouse import imported_row, land

N_PROMPTS = 6 * 2  # per_domain 1 over 6 domains: neutral + one disability


@pytest.fixture
def servers():
    started = [FakeOpenAIServer() for _ in range(3)]
    yield started
    for s in started:
        s.close()


def _write(tmp_path, targets: list[dict], name: str = "outcome", subset: dict | None = None) -> str:
    cfg = {
        "name": name,
        "build": False,
        "subset": subset or {"per_domain": 1, "disabilities": ["hearing"]},
        "targets": [
            {
                "backend": "openai",
                "model": SERVED_ID,
                "batch_size": 1,
                "api_key_env": "ABLEAUDIT_TEST_NO_SUCH_KEY",
                "decoding": {"max_new_tokens": 16},
                **t,
            }
            for t in targets
        ],
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _query(wh, sql: str) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _read_all(path) -> str:
    """Every value of a DuckDB file or Parquet file as text (strings may be stored compressed)."""
    con = (
        duckdb.connect(str(path), read_only=True) if path.suffix == ".duckdb" else duckdb.connect()
    )
    try:
        if path.suffix == ".parquet":
            return str(con.execute("select * from read_parquet(?)", [str(path)]).fetchall())
        tables = con.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_type = 'BASE TABLE'"
        ).fetchall()
        return str([con.execute(f'select * from "{s}"."{t}"').fetchall() for s, t in tables])
    finally:
        con.close()


def test_failed_requests_fail_the_run_and_a_rerun_fills_the_gaps(tmp_path, servers, capsys):
    """3 requests answered 500 (no client retries) and 1 with a null content: the flow lands all
    it can, then fails naming both kinds; the CLI exits 3 while any remain; a healthy re-run asks
    only for those and exits 0."""
    server = servers[0]
    wh = tmp_path / "wh.duckdb"
    config = _write(
        tmp_path, [{"name": "one", "base_url": server.base_url, "options": {"max_retries": 0}}]
    )
    server.fail_next, server.null_content_next = 3, 1
    state = audit_flow(config=config, warehouse=str(wh), return_state=True)
    assert state.is_failed()
    assert "4 generations failed (3 HTTP 500, 1 no content)" in state.message
    assert "run the same command again: only the failed requests are sent" in state.message
    statuses = dict(_query(wh, "select status, count(*) from raw.generations group by all"))
    assert statuses == {"ok": N_PROMPTS - 4, "error": 4}
    assert _query(wh, "select status from raw.runs") == [("failed",)]

    asked = len(server.payloads)
    server.fail_next = 1
    assert main(["audit", "--config", config, "--warehouse", str(wh)]) == EXIT_INCOMPLETE
    err = capsys.readouterr().err
    assert "audit incomplete: 1 generations failed (1 HTTP 500)" in err
    assert len(server.payloads) == asked + 4

    assert main(["audit", "--config", config, "--warehouse", str(wh)]) == 0
    assert len(server.payloads) == asked + 4 + 1
    statuses = dict(_query(wh, "select status, count(*) from raw.generations group by all"))
    assert statuses == {"ok": N_PROMPTS}
    assert [s for (s,) in _query(wh, "select status from raw.runs order by started_at")] == [
        "failed",
        "failed",
        "completed",
    ]


def test_no_credential_reaches_any_output(tmp_path, servers, monkeypatch, capfd, caplog):
    """Canaries in every place a key can be written: the env var api_key_env names, a base_url's
    userinfo, a replica's userinfo, extra_body fields named like secrets. A run with
    failing replicas (their URLs land in error messages), a healthy re-run and a build leave none
    of them in the warehouse's files, the published copy, its Parquet files, the report, the logs
    or the terminal."""
    caplog.set_level(logging.DEBUG)
    canary = {
        where: f"canary{i}{secrets.token_hex(8)}"
        for i, where in enumerate(["env", "url", "replica", "option", "body"])
    }
    monkeypatch.setenv("ABLEAUDIT_TEST_CANARY_KEY", canary["env"])
    a, b, c = servers
    config = _write(
        tmp_path,
        [
            {
                "name": "one",
                "base_url": a.base_url.replace("http://", f"http://user:{canary['url']}@"),
                "api_key_env": "ABLEAUDIT_TEST_CANARY_KEY",
                # an `options:` key the backend does not read (`api_key`) is refused before the
                # run starts (tests/functional/test_preflight.py); extra_body is sent as written
                "options": {
                    "extra_body": {"client_secret": canary["body"], "api_key": canary["option"]},
                },
            },
            {
                "name": "two",
                "base_url": [
                    b.base_url,
                    c.base_url.replace("http://", f"http://k:{canary['replica']}@"),
                ],
                "options": {"max_retries": 0},
            },
        ],
        name="canaries",
    )
    wh = tmp_path / "wh" / "canaries.duckdb"
    b.fail_next = c.fail_next = 2  # two requests of `two` fail on both replicas
    assert main(["audit", "--config", config, "--warehouse", str(wh)]) == EXIT_INCOMPLETE
    messages = [m for (m,) in _query(wh, "select error_message from raw.generation_errors")]
    assert any("all 2 servers failed" in m for m in messages)
    assert main(["audit", "--config", config, "--warehouse", str(wh)]) == 0
    # the build publishes a copy, Parquet files and the report beside the warehouse
    monkeypatch.setenv("ABLEAUDIT_REGARD_MODEL", str(tmp_path / "no-regard-model-here"))
    assert main(["build", "--warehouse", str(wh)]) == 0
    assert list((wh.parent / "published").rglob("*.parquet"))
    # the servers got the URLs' credentials (as the Basic header they stand for), as written
    basic = "Basic " + base64.b64encode(f"user:{canary['url']}".encode()).decode()
    assert {h["authorization"] for h in a.headers} == {basic}
    assert any(
        canary["replica"] in base64.b64decode(h["authorization"][6:]).decode() for h in c.headers
    )
    out = capfd.readouterr()
    outputs = {
        "stdout": out.out,
        "stderr": out.err,
        "logs": "\n".join(r.getMessage() for r in caplog.records),
        # read back through SQL too: DuckDB may store strings compressed, hiding them from a byte grep
        "raw.runs": str(_query(wh, "select * from raw.runs")),
        "raw.generations": str(_query(wh, "select * from raw.generations")),
        "raw.generation_errors": str(_query(wh, "select * from raw.generation_errors")),
    }
    outputs |= {
        str(p): p.read_bytes().decode("latin-1") for p in wh.parent.rglob("*") if p.is_file()
    }
    outputs |= {
        f"{p} (read)": _read_all(p)
        for p in wh.parent.rglob("*")
        if p.suffix in (".duckdb", ".parquet") and p.is_file()
    }
    assert "all 2 servers failed" in outputs[f"{wh} (read)"]  # the reads see the values
    for where, value in canary.items():
        leaked = [name for name, text in outputs.items() if value in text]
        assert not leaked, f"the {where} canary is in {leaked}"


def test_an_audit_of_imported_units_lands_nothing_and_names_the_fix(tmp_path, servers, capsys):
    """Responses of model 'served' were imported for edu_001 (neutral and hearing); an audit whose
    target reports that model_id would land a second answer of each: it exits 2 with one message
    before sending a request, and raw.generations is unchanged. Under a distinct model_id the
    same audit runs."""
    server = servers[0]
    wh = tmp_path / "wh.duckdb"
    connect(wh).close()  # the raw layer
    land(
        wh,
        [
            imported_row("served", "baseline", "edu_001", "education", d, "ok", "Imported.")
            for d in (None, "hearing")
        ],
    )
    landed = "select count(*), sum(hash(generation_id, response_text)) from raw.generations"
    before = _query(wh, landed)
    target = {"name": "one", "model_id": "served", "base_url": server.base_url}
    subset = {"query_ids": ["edu_001", "fin_001"], "disabilities": ["hearing"]}
    config = _write(tmp_path, [target], subset=subset)

    assert main(["audit", "--config", config, "--warehouse", str(wh)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("ableaudit: error:") == 1 and "Traceback" not in err
    assert "target 'one' (task text, model_id 'served'): 2 of its 4 planned units" in err
    assert "landed by run run-served" in err  # rows written by plain SQL carry no landing id
    assert "`model_id: served-audited`" in err
    assert "`ableaudit forget LANDING_ID` removes one" in err
    assert server.payloads == []
    assert _query(wh, landed) == before

    config = _write(tmp_path, [{**target, "model_id": "served-audited"}], subset=subset)
    assert main(["audit", "--config", config, "--warehouse", str(wh)]) == 0
    assert _query(
        wh, "select model_id, source, count(*) from raw.generations group by all order by all"
    ) == [("served", "imported", 2), ("served-audited", "generated", 4)]
