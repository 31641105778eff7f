"""Targets generating side by side (``parallel_targets``), each on its own OpenAI-compatible server.

Real HTTP servers on 127.0.0.1 (tests.fixtures.openai_server) and the real
`audit` flow; only the dbt build is skipped.
"""

from __future__ import annotations

import duckdb
import pytest
import yaml

from ableaudit.audit.flow import audit as audit_flow
from ableaudit.keys import model_fingerprint
from tests.fixtures.openai_server import (
    OPENAI_TARGET,
    SERVED_ID,
    SNAPSHOT_ID,
    FakeOpenAIServer,
    two_target_config,
)

N_PROMPTS = 6 * 2  # per_domain 1 over 6 domains: neutral + one disability


@pytest.fixture
def servers():
    started = [FakeOpenAIServer() for _ in range(3)]
    for s in started:
        s.delay_s = 0.15
    yield started
    for s in started:
        s.close()


def _config(tmp_path, servers, parallel: int, extra_targets=()) -> str:
    cfg = two_target_config(servers, "parallel", parallel_targets=parallel)
    cfg["targets"] += [{**OPENAI_TARGET, **t} for t in extra_targets]
    path = tmp_path / f"parallel{parallel}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _landed(wh) -> dict[str, int]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return dict(
            con.execute(
                "select target, count(*) from raw.generations where status = 'ok' group by all"
            ).fetchall()
        )
    finally:
        con.close()


@pytest.mark.slow
def test_targets_run_side_by_side_and_a_failing_one_stops_no_other(tmp_path, servers):
    """Three targets at once: `one` on a server, `two` on two replicas, `broken` naming a model no server serves.

    `broken` fails at start; `one` and `two` still land everything, generating at
    the same time; then the run fails naming `broken`.
    """
    a, b, c = servers
    wh = tmp_path / "wh.duckdb"
    broken = {"name": "broken", "model": "not-served", "base_url": a.base_url}
    with pytest.raises(
        Exception, match=r"1 of 3 targets failed.*broken: .*does not serve model 'not-served'"
    ):
        audit_flow(
            config=_config(tmp_path, servers, parallel=3, extra_targets=[broken]), warehouse=str(wh)
        )
    assert _landed(wh) == {"one": N_PROMPTS, "two": N_PROMPTS}
    # both targets were generating at the same time, and target two used both its replicas
    one = (min(s for s, _ in a.spans), max(e for _, e in a.spans))
    two = (min(s for s, _ in b.spans + c.spans), max(e for _, e in b.spans + c.spans))
    assert max(one[0], two[0]) < min(one[1], two[1])
    assert len(a.spans) == N_PROMPTS
    assert len(b.spans) >= 2 and len(c.spans) >= 2 and len(b.spans) + len(c.spans) == N_PROMPTS
    assert b.max_inflight <= 2 and c.max_inflight <= 2


def _user_texts(server: FakeOpenAIServer) -> set[str]:
    return {m["content"] for p in server.payloads for m in p["messages"] if m["role"] == "user"}


def test_each_row_lands_with_the_revision_that_answered_it(tmp_path, servers):
    """`one` (one server) and `two` (two replicas reporting different snapshots) land every row with the
    revision its server reported, never the planned fingerprint; the key still hashes the planned
    fingerprint, so a server that later reports another revision regenerates nothing."""
    _, b, c = servers
    for s in servers:
        s.delay_s = 0.02
    b.snapshot, c.snapshot = "echo-model-replica-b", "echo-model-replica-c"
    wh = tmp_path / "wh.duckdb"
    config = _config(tmp_path, servers, parallel=2)
    audit_flow(config=config, warehouse=str(wh))

    def rows() -> list[tuple]:
        con = duckdb.connect(str(wh), read_only=True)
        try:
            return con.execute(
                "select generation_id, target, prompt_text, model_revision from raw.generations "
                "where status = 'ok' order by generation_id"
            ).fetchall()
        finally:
            con.close()

    landed = rows()
    assert len(landed) == 2 * N_PROMPTS
    planned = model_fingerprint(SERVED_ID, None)
    assert planned not in {rev for *_, rev in landed}
    assert {rev for _, target, _, rev in landed if target == "one"} == {f"{SNAPSHOT_ID}@fp_test"}
    on_b, on_c = _user_texts(b), _user_texts(c)
    answered = {}
    for _, _target, text, rev in (r for r in landed if r[1] == "two"):
        assert (text in on_b) != (text in on_c), "each prompt went to exactly one replica"
        expected = (
            "echo-model-replica-b@fp_test" if text in on_b else "echo-model-replica-c@fp_test"
        )
        assert rev == expected
        answered[rev] = answered.get(rev, 0) + 1
    assert sorted(answered) == ["echo-model-replica-b@fp_test", "echo-model-replica-c@fp_test"]

    # a replica now reporting another revision: same keys, so nothing is asked or landed again
    b.snapshot = "echo-model-replica-b-next"
    asked = [len(s.payloads) for s in servers]
    audit_flow(config=config, warehouse=str(wh))
    assert [len(s.payloads) for s in servers] == asked
    assert rows() == landed


def test_one_target_at_a_time_is_the_default(tmp_path, servers):
    from ableaudit.config import parse_config

    cfg = yaml.safe_load(open(_config(tmp_path, servers, parallel=1)))
    del cfg["parallel_targets"]
    assert parse_config(cfg).parallel_targets == 1
    with pytest.raises(ValueError, match="parallel_targets"):
        parse_config({**cfg, "parallel_targets": 0})
