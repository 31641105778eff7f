"""The fault matrix: the `ableaudit audit` command (in-process, without its dbt build) against
fault-injecting servers on 127.0.0.1 (tests.fixtures.fault_server), one server and one target
per case, so one audit run drills every fault and each target's rows show one fault. Each
target's server faults 3 of its 12 prompts.

- transient faults (a server that stops listening for a while, a reset, a reply cut short, 500,
  429 with Retry-After, 503, a reply beyond the timeout) are retried within the run: every row of their targets is an answer, each faulted
  prompt was asked twice, and the run counts none of them as failed;
- faults in the token counts only land the answer with null counts;
- permanent faults (a body that is not JSON, a truncated body, a null content, no choices,
  a 400, and a 503 that outlasts the retries) land as error rows naming the error kind, with no
  text to score (scorers read only non-null texts); the command exits 3 and counts them per
  kind, saying how to retry;
- running the same command again sends only the failed requests and completes (exit 0), with
  one row per prompt and target.

One test, two runs: each run prepares the prompts with dbt, the slow part.
"""

from __future__ import annotations

import re
from collections import Counter

import duckdb
import pytest
import yaml

from ableaudit.audit.runs import RETRY_HINT
from ableaudit.cli.audit import EXIT_INCOMPLETE
from ableaudit.cli.main import main
from tests.fixtures.fault_server import FAULTS, HARMLESS, PERMANENT, TRANSIENT, FaultServer
from tests.fixtures.openai_server import SERVED_ID

N_PROMPTS = 6 * 2  # per_domain 1 over 6 domains: neutral + one disability
FAULTED = 3  # prompts of each target that get its fault

# case (the target's name) -> (fault, attempts faulted per prompt: None = every attempt)
CASES = {kind: (kind, 1) for kind in FAULTS} | {"http503_lasting": ("http503", None)}
FAILING = (*PERMANENT, "http503_lasting")
# what a failing case's error message starts with: the error kind the run summary counts
ERROR_KIND = {
    "malformed": "malformed reply",
    "truncated": "malformed reply",
    "no_choices": "malformed reply",
    "null_content": "no content",
    "http400": "HTTP 400",
    "http503_lasting": "HTTP 503",
}


@pytest.fixture
def servers():
    started = {case: FaultServer(slow_s=2.5) for case in CASES}
    yield started
    for s in started.values():
        s.close()


def _config(tmp_path, servers: dict[str, FaultServer]) -> str:
    targets = [
        {
            "name": case,
            "backend": "openai",
            "model": SERVED_ID,
            "base_url": server.base_url,
            "batch_size": 2,
            "api_key_env": "ABLEAUDIT_TEST_NO_SUCH_KEY",
            "decoding": {"max_new_tokens": 16},
            "options": {
                # a refusing server is back 1 s after each of its 3 faulted prompts; a request
                # sent beside them may meet all three closures (backoff 0.5, 1, 2, 4, 8 s)
                "max_retries": 6 if case == "refuse" else 1,
                **({"timeout_s": 1.0} if case == "slow" else {}),
            },
        }
        for case, server in servers.items()
    ]
    cfg = {
        "name": "faults",
        "build": False,
        "parallel_targets": len(targets),
        "subset": {"per_domain": 1, "disabilities": ["hearing"]},
        "targets": targets,
    }
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _query(wh, sql: str, params=None) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def _rows(wh, case: str) -> list[tuple]:
    """The target's rows: (status, response_text, error_message, prompt_tokens, prompt_text)."""
    return _query(
        wh,
        "select status, response_text, error_message, prompt_tokens, prompt_text "
        "from raw.generations where target = ? order by prompt_text",
        [case],
    )


@pytest.mark.slow
def test_fault_matrix(tmp_path, servers, capsys):
    assert set(ERROR_KIND) == set(FAILING) and set(FAULTS) <= set(CASES)
    for case, (kind, attempts) in CASES.items():
        servers[case].inject(kind, prompts=FAULTED, attempts=attempts)
    wh = tmp_path / "wh" / "faults.duckdb"
    config = _config(tmp_path, servers)

    assert main(["audit", "--config", config, "--warehouse", str(wh)]) == EXIT_INCOMPLETE
    err = capsys.readouterr().err
    failed = FAULTED * len(FAILING)
    # the summary counts the failed requests per kind, and only those, and says how to retry
    assert f"audit incomplete: {failed} generations failed (" in err
    per_kind = Counter()
    for case in FAILING:
        per_kind[ERROR_KIND[case]] += FAULTED
    listed = re.search(r"generations failed \(([^)]*)\)", err).group(1)
    assert sorted(listed.split(", ")) == sorted(f"{n} {k}" for k, n in per_kind.items())
    assert RETRY_HINT in err
    for case, (kind, _) in CASES.items():
        server, rows = servers[case], _rows(wh, case)
        assert len(rows) == N_PROMPTS and server.faults[kind] >= FAULTED, case
        if case in FAILING:
            errors = [r for r in rows if r[0] == "error"]
            assert len(errors) == FAULTED, case
            assert {r[4] for r in errors} == server.faulted()
            # an error row has no text (nothing to score) and names its kind
            assert all(r[1] is None and r[2].startswith(ERROR_KIND[case]) for r in errors)
            # a permanent fault is not retried within the run; the lasting 503 is, once
            assert server.requests == N_PROMPTS + (FAULTED if kind in TRANSIENT else 0), case
        else:
            assert [r[0] for r in rows] == ["ok"] * N_PROMPTS, case
            assert all(r[1].startswith("echo: ") for r in rows)
            retried = FAULTED if kind in TRANSIENT else 0  # each faulted prompt asked again
            assert server.requests == N_PROMPTS + retried, case
            assert sorted(server.asked.values()) == [1] * (N_PROMPTS - retried) + [2] * retried
            assert sum(r[3] is None for r in rows) == (FAULTED if kind in HARMLESS else 0)
    # the 429s' retries waited for their Retry-After (1 s): a lower bound, so never flaky
    waits = [t[1] - t[0] for t in servers["http429"].ask_times.values() if len(t) == 2]
    assert len(waits) == FAULTED and min(waits) >= 0.9
    assert _query(wh, "select count(*) from raw.generation_errors") == [(failed,)]
    assert _query(wh, "select status from raw.runs") == [("failed",)]

    # the same command again: only the failed requests are sent, and the audit completes
    servers["http503_lasting"].heal()
    asked = {case: server.requests for case, server in servers.items()}
    assert main(["audit", "--config", config, "--warehouse", str(wh)]) == 0
    assert "Audit finished" in capsys.readouterr().out
    for case, server in servers.items():
        assert server.requests == asked[case] + (FAULTED if case in FAILING else 0), case
        assert [r[0] for r in _rows(wh, case)] == ["ok"] * N_PROMPTS, case
    n, keys, pairs = _query(
        wh,
        "select count(*), count(distinct generation_id), count(distinct (target, prompt_text)) "
        "from raw.generations",
    )[0]
    assert n == keys == pairs == N_PROMPTS * len(CASES)  # no duplicates
    # each failed attempt is kept; the runs say what happened
    assert _query(wh, "select count(*) from raw.generation_errors") == [(failed,)]
    assert [s for (s,) in _query(wh, "select status from raw.runs order by started_at")] == [
        "failed",
        "completed",
    ]
