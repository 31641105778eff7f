"""What a run stores (a redacted config) and what it reports undone (failed requests by kind)."""

from __future__ import annotations

import json

import duckdb

from ableaudit.audit.runs import (
    REDACTED,
    AuditIncomplete,
    error_kind,
    redacted_config_json,
    run_failures,
    start_run,
)
from ableaudit.config import parse_config
from ableaudit.warehouse import connect
from ableaudit.warehouse.landing import land_generations, land_judgments
from tests.fixtures.warehouse import synthetic_generations


def _config() -> dict:
    return {
        "name": "secrets",
        "targets": [
            {
                "name": "one",
                "backend": "openai",
                "model": "m",
                "base_url": "http://user:url-canary@api.example.com:8443/v1?x=1",
                "api_key_env": "MY_KEY",
                "decoding": {"max_new_tokens": 16},
                "options": {
                    "api_key": "opt-canary",
                    "authToken": "token-canary",
                    "max_tokens_field": "max_completion_tokens",
                    "extra_body": {"client_secret": "body-canary", "top_k": -1},
                },
            },
            {
                "name": "two",
                "backend": "openai",
                "model": "m",
                "base_url": ["http://127.0.0.1:1/v1", "https://k:replica-canary@10.0.0.2/v1"],
            },
        ],
    }


def test_the_stored_config_has_no_credential_and_everything_else():
    cfg = parse_config(_config())
    stored = redacted_config_json(cfg)
    for canary in ("url-canary", "replica-canary", "opt-canary", "token-canary", "body-canary"):
        assert canary not in stored
    one, two = json.loads(stored)["targets"]
    assert one["base_url"] == "http://api.example.com:8443/v1?x=1"
    assert two["base_url"] == ["http://127.0.0.1:1/v1", "https://10.0.0.2/v1"]
    assert one["api_key_env"] == "MY_KEY"  # a variable's name, not a secret
    assert one["options"]["api_key"] == one["options"]["authToken"] == REDACTED
    assert one["options"]["max_tokens_field"] == "max_completion_tokens"
    assert one["options"]["extra_body"] == {"client_secret": REDACTED, "top_k": -1}
    assert one["decoding"]["max_new_tokens"] == 16
    # the config itself is untouched: the backend still gets the URL as written
    assert cfg.targets[0].base_url.startswith("http://user:url-canary@")


def test_start_run_stores_the_redacted_config(warehouse):
    start_run(warehouse, "r1", parse_config(_config()))
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        (stored,) = con.execute("select config_json from raw.runs").fetchone()
    finally:
        con.close()
    assert "canary" not in stored and REDACTED in stored


def test_error_kinds_group_messages_by_type_or_status():
    assert error_kind("APITimeoutError: Request timed out.") == "APITimeoutError"
    assert error_kind("HTTP 500: temporary overload") == "HTTP 500"
    assert error_kind("HTTP 400: prompt is longer than the context") == "HTTP 400"
    assert error_kind("openai.APIConnectionError: Connection error.") == "openai.APIConnectionError"
    assert error_kind("all 2 servers failed: http://a/v1: HTTP 500: x") == "all servers failed"
    assert error_kind("no content: http://u:k@h/v1 returned a null content") == "no content"
    assert (
        error_kind("the server at http://u:k@h/v1 hung up") == "the server at http://h/v1 hung up"
    )
    assert error_kind(None) == "unknown error"


def test_run_failures_count_this_runs_errors_by_kind(warehouse):
    connect(warehouse).close()
    rows = synthetic_generations(0)[:6]
    for i, row in enumerate(rows):
        row.update(run_id="this" if i < 5 else "other", status="ok", response_text="fine")
    for row, message in zip(
        rows, ["HTTP 500: overload", "HTTP 500: overload again", "ValueError: bad image"]
    ):
        row.update(status="error", response_text=None, error_message=message)
    rows[5].update(status="error", response_text=None, error_message="HTTP 503: elsewhere")
    land_generations(warehouse, rows)
    failures = run_failures(warehouse, "this")
    assert dict(failures.generations) == {"HTTP 500": 2, "ValueError": 1}
    assert not failures.judgments
    message = str(AuditIncomplete(failures))
    assert message.startswith("3 generations failed (2 HTTP 500, 1 ValueError)")
    assert "run the same command again: only the failed requests are sent" in message
    assert not run_failures(warehouse, "no-such-run")


def test_run_failures_count_failed_judge_calls(warehouse):
    base = {
        "judge_kind": "rubric",
        "judge_name": "j",
        "judge_model": "m",
        "prompt_version": "v",
        "subject_hash": "h",
        "source": "judged",
        "run_id": "this",
    }
    land_judgments(
        warehouse,
        [
            {**base, "judgment_id": "a", "call_status": "error", "error_message": "HTTP 429: slow"},
            {**base, "judgment_id": "b", "call_status": "ok", "parse_status": "parsed"},
        ],
    )
    failures = run_failures(warehouse, "this")
    assert dict(failures.judgments) == {"HTTP 429": 1} and not failures.generations
    assert str(AuditIncomplete(failures)).startswith("1 judge calls failed (1 HTTP 429)")
