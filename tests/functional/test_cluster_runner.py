"""Targets generated on a Dask cluster (``task_runner: {kind: dask}``), the flow landing every row.

A real Dask LocalCluster (prefect-dask's DaskTaskRunner), real HTTP servers on 127.0.0.1
(tests.fixtures.openai_server) and the real `audit` flow; only the dbt build is skipped.
The same audit on the default thread runner is the reference the cluster's rows must equal.
"""

from __future__ import annotations

import threading

import duckdb
import pytest
import yaml

from ableaudit import stopping
from ableaudit.audit import tasks
from ableaudit.audit.flow import audit as audit_flow
from ableaudit.audit.runs import AuditInterrupted
from tests.fixtures.openai_server import OPENAI_TARGET, FakeOpenAIServer, two_target_config

pytest.importorskip("prefect_dask", reason="the scale extra (requirements-scale.lock)")

N_PROMPTS = 6 * 2  # per_domain 1 over 6 domains: neutral + one disability
COLUMNS = (
    "generation_id, target, prompt_id, prompt_text, status, response_text, finish_reason, "
    "model_revision, temperature, sample_index"
)


@pytest.fixture
def servers():
    started = [FakeOpenAIServer() for _ in range(3)]
    for s in started:
        s.delay_s = 0.02
    yield started
    for s in started:
        s.close()


def _config(tmp_path, servers, task_runner: dict | None, name: str) -> str:
    cfg = two_target_config(servers, "cluster", parallel_targets=2)
    if task_runner is not None:
        cfg["task_runner"] = task_runner
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _rows(wh) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(
            f"select {COLUMNS} from raw.generations order by generation_id"
        ).fetchall()
    finally:
        con.close()


def _asked(servers) -> int:
    return sum(len(s.payloads) for s in servers)


GENERATED_ON: set[str] = set()
_REAL_GENERATE = tasks.generate_rows


def _generate_recording_the_thread(*args, **kwargs):
    # module level: a task pickles it by reference, so the set is this module's own
    GENERATED_ON.add(threading.current_thread().name)
    return _REAL_GENERATE(*args, **kwargs)


DASK = {"kind": "dask", "n_workers": 2, "processes": False, "chunk_size": 5}


@pytest.mark.slow
@pytest.mark.long
def test_a_dask_cluster_lands_every_prompt_once_and_equals_the_thread_runner(
    tmp_path, servers, monkeypatch
):
    reference = tmp_path / "threads.duckdb"
    audit_flow(config=_config(tmp_path, servers, None, "threads"), warehouse=str(reference))
    asked_by_threads = _asked(servers)
    assert asked_by_threads == 2 * N_PROMPTS

    # which threads generate, and which open a DuckDB file (the workers run in this process)
    generated_on, opened_on = GENERATED_ON, set()
    generated_on.clear()
    real_connect = duckdb.connect

    def connect(*args, **kwargs):
        opened_on.add(threading.current_thread().name)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(tasks, "generate_rows", _generate_recording_the_thread)
    monkeypatch.setattr(duckdb, "connect", connect)
    wh = tmp_path / "dask.duckdb"
    config = _config(tmp_path, servers, DASK, "dask")
    summary = audit_flow(config=config, warehouse=str(wh))
    monkeypatch.setattr(duckdb, "connect", real_connect)
    # one writer: the chunks ran on Dask's worker threads, none of which opened the warehouse
    assert generated_on and all("Dask-Default-Threads" in name for name in generated_on)
    assert not generated_on & opened_on
    landed = _rows(wh)
    # every prompt asked once and landed once, as the default runner lands it
    assert _asked(servers) - asked_by_threads == 2 * N_PROMPTS
    assert len(landed) == len({r[0] for r in landed}) == 2 * N_PROMPTS
    assert {r[4] for r in landed} == {"ok"}
    assert landed == _rows(reference)
    assert summary["targets"]["one"]["inserted"] == N_PROMPTS
    assert summary["targets"]["two"]["inserted"] == N_PROMPTS

    # resume: rows lost since are asked again, and nothing else
    con = duckdb.connect(str(wh))
    gone = con.execute(
        "select generation_id from raw.generations where target = 'two' order by 1 limit 7"
    ).fetchall()
    con.execute(
        "delete from raw.generations where generation_id in (select unnest(?))",
        [[g[0] for g in gone]],
    )
    con.close()
    before = _asked(servers)
    audit_flow(config=config, warehouse=str(wh))
    assert _asked(servers) - before == 7
    assert _rows(wh) == landed


@pytest.mark.slow
@pytest.mark.long
def test_a_stop_lands_the_chunks_that_finished_and_a_rerun_asks_the_rest(
    tmp_path, servers, monkeypatch
):
    """A stop request after the first landed chunk: nothing more is sent, what came back lands,
    the run is interrupted; the same command then asks exactly for what is missing."""
    from ableaudit.audit import runners

    landed_calls = []
    real_land = runners.land_generations

    def land_then_stop(wh, rows):
        report = real_land(wh, rows)
        landed_calls.append(len(rows))
        if len(landed_calls) == 1:
            stopping.request(2)  # SIGINT, as the signal handler asks
        return report

    monkeypatch.setattr(runners, "land_generations", land_then_stop)
    wh = tmp_path / "stop.duckdb"
    config = _config(tmp_path, servers, {**DASK, "chunk_size": 3}, "stop")
    with pytest.raises(AuditInterrupted):
        audit_flow(config=config, warehouse=str(wh))
    first = _rows(wh)
    # what came back landed (the first chunk, and what the chunk in flight had finished);
    # no chunk was sent after the stop, so most prompts were never asked
    assert len(first) == sum(landed_calls) and 3 <= len(first) < 2 * N_PROMPTS
    asked = _asked(servers)
    assert len(first) <= asked <= 3 + 3  # the landed chunk and the one in flight

    monkeypatch.setattr(runners, "land_generations", real_land)
    audit_flow(config=config, warehouse=str(wh))
    assert _asked(servers) - asked == 2 * N_PROMPTS - len(first)  # exactly what was missing
    rows = _rows(wh)
    assert len(rows) == len({r[0] for r in rows}) == 2 * N_PROMPTS


@pytest.mark.slow
@pytest.mark.long
def test_a_local_ray_cluster_lands_every_prompt_once(tmp_path, servers):
    """Opt-in: runs where ray and prefect-ray are installed (docs/scale-out.md says how)."""
    pytest.importorskip(
        "prefect_ray", reason="ray and prefect-ray are not pinned (docs/scale-out.md)"
    )
    reference = tmp_path / "threads.duckdb"
    audit_flow(config=_config(tmp_path, servers, None, "threads"), warehouse=str(reference))
    asked = _asked(servers)
    wh = tmp_path / "ray.duckdb"
    ray = {"kind": "ray", "n_workers": 2, "chunk_size": 5}
    audit_flow(config=_config(tmp_path, servers, ray, "ray"), warehouse=str(wh))
    landed = _rows(wh)
    assert _asked(servers) - asked == 2 * N_PROMPTS
    assert len(landed) == len({r[0] for r in landed}) == 2 * N_PROMPTS
    assert landed == _rows(reference)


RUBRIC = '{"relevance": 3, "completeness": 2, "accuracy": 3, "clarity": 1, "declined": false, "score": 9}'
CONTRASTIVE = (
    '{"interpret": "No", "stereotype": "No", "framing": "Ambiguous", '
    '"decline_in_response_a": false, "decline_in_response_b": false}'
)
JUDGED = (
    "judgment_id, judge_kind, judge_name, generation_id, neutral_generation_id, "
    "disability_generation_id, call_status, raw_output, parse_status, parsed_json"
)
JUDGED_ON: set[str] = set()


def _verdict(text: str) -> str:
    return CONTRASTIVE if "<<<RESPONSE_A_" in text else RUBRIC


def _judged(wh) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(f"select {JUDGED} from raw.judgments order by judgment_id").fetchall()
    finally:
        con.close()


def _judged_config(tmp_path, servers, judge_server, task_runner: dict | None, name: str) -> str:
    """The two targets and one judge (``judge_server``), on ``task_runner``."""
    judge = {
        "name": "echo-judge",
        "target": {
            **OPENAI_TARGET,
            "name": "echo-judge",
            "base_url": judge_server.base_url,
            "decoding": {"temperature": 0.0, "max_new_tokens": 64},
        },
    }
    cfg = two_target_config(servers, "judged", parallel_targets=2, judges=[judge])
    if task_runner is not None:
        cfg["task_runner"] = task_runner
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _forget_judgments(wh) -> None:
    con = duckdb.connect(str(wh))
    try:
        con.execute("delete from raw.judgments")
    finally:
        con.close()


def _judge_chunk_recording_the_thread(*args, **kwargs):
    from ableaudit.judges import runner

    JUDGED_ON.add(threading.current_thread().name)
    return runner.REAL_JUDGE_CHUNK_ROWS(*args, **kwargs)


@pytest.mark.slow
@pytest.mark.long
def test_judges_on_a_dask_cluster_land_every_verdict_once_and_equal_the_thread_runner(
    tmp_path, servers, monkeypatch
):
    """The flow's judge step on the cluster: each judge's verdicts in judge-chunk tasks on the
    workers, the flow landing them; the same verdicts as the judge step on threads, and a
    re-run asks the judge nothing."""
    from ableaudit.judges import runner

    judge_server = FakeOpenAIServer()
    judge_server.answer = _verdict

    def config(task_runner, name):
        return _judged_config(tmp_path, servers, judge_server, task_runner, name)

    try:
        reference = tmp_path / "threads.duckdb"
        by_threads = audit_flow(config=config(None, "threads"), warehouse=str(reference))
        asked = len(judge_server.payloads)
        # 6 rubric verdicts per condition and 6 pairs; both targets echo the same texts, so
        # their verdicts are shared (one key per subject)
        assert asked == 2 * 6 + 6

        JUDGED_ON.clear()
        opened_on: set[str] = set()
        real_connect = duckdb.connect

        def connect(*args, **kwargs):
            opened_on.add(threading.current_thread().name)
            return real_connect(*args, **kwargs)

        monkeypatch.setattr(runner, "REAL_JUDGE_CHUNK_ROWS", runner.judge_chunk_rows, raising=False)
        monkeypatch.setattr(runner, "judge_chunk_rows", _judge_chunk_recording_the_thread)
        monkeypatch.setattr(duckdb, "connect", connect)
        wh = tmp_path / "dask.duckdb"
        dask = config(DASK, "dask")
        summary = audit_flow(config=dask, warehouse=str(wh))
        monkeypatch.setattr(duckdb, "connect", real_connect)
        # one writer: the judge chunks ran on Dask's worker threads, none of which opened the warehouse
        assert JUDGED_ON and all("Dask-Default-Threads" in name for name in JUDGED_ON)
        assert not JUDGED_ON & opened_on
        assert len(judge_server.payloads) - asked == asked  # every verdict asked once
        landed = _judged(wh)
        assert len(landed) == asked and {r[8] for r in landed} == {"parsed"}
        assert landed == _judged(reference)
        assert summary["judges"] == by_threads["judges"]
        counts = summary["judges"]["echo-judge"]
        assert counts["rubric"]["subjects"] == 24 and counts["rubric"]["inserted"] == 12
        assert counts["contrastive"]["subjects"] == 12 and counts["contrastive"]["inserted"] == 6

        # a re-run: every verdict is landed, so the judge is asked nothing
        before = len(judge_server.payloads)
        again = audit_flow(config=dask, warehouse=str(wh))
        assert len(judge_server.payloads) == before
        assert again["judges"]["echo-judge"]["rubric"]["cached"] == 12
        assert _judged(wh) == landed

        # `ableaudit judge` with the cluster's config: its verdicts on the workers too
        from ableaudit.cli.judges import judge_command

        _forget_judgments(wh)
        JUDGED_ON.clear()
        monkeypatch.setattr(duckdb, "connect", connect)
        counts = judge_command(dask, wh)
        monkeypatch.setattr(duckdb, "connect", real_connect)
        assert JUDGED_ON and all("Dask-Default-Threads" in name for name in JUDGED_ON)
        assert not JUDGED_ON & opened_on
        assert len(judge_server.payloads) - before == asked
        assert _judged(wh) == landed
        assert counts == by_threads["judges"]
    finally:
        judge_server.close()


@pytest.mark.slow
@pytest.mark.long
def test_judges_on_a_local_ray_cluster_land_what_the_thread_runner_lands(tmp_path, servers):
    """Opt-in, as the Ray test above: the flow's judge step, then ``ableaudit judge``, with
    their judge chunks in Ray's worker processes; the same verdicts as on threads."""
    pytest.importorskip(
        "prefect_ray", reason="ray and prefect-ray are not pinned (docs/scale-out.md)"
    )
    from ableaudit.cli.judges import judge_command

    judge_server = FakeOpenAIServer()
    judge_server.answer = _verdict
    try:
        reference = tmp_path / "threads.duckdb"
        by_threads = audit_flow(
            config=_judged_config(tmp_path, servers, judge_server, None, "threads"),
            warehouse=str(reference),
        )
        asked = len(judge_server.payloads)
        ray = {"kind": "ray", "n_workers": 2, "chunk_size": 5}
        config = _judged_config(tmp_path, servers, judge_server, ray, "ray")
        wh = tmp_path / "ray.duckdb"
        summary = audit_flow(config=config, warehouse=str(wh))
        assert len(judge_server.payloads) == 2 * asked  # every verdict asked once
        assert _judged(wh) == _judged(reference)
        assert summary["judges"] == by_threads["judges"]

        _forget_judgments(wh)
        assert judge_command(config, wh) == by_threads["judges"]
        assert len(judge_server.payloads) == 3 * asked
        assert _judged(wh) == _judged(reference)
    finally:
        judge_server.close()
