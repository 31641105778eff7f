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

from ableaudit.audit import stopping, tasks
from ableaudit.audit.flow import audit as audit_flow
from ableaudit.audit.runs import AuditInterrupted
from tests.fixtures.openai_server import FakeOpenAIServer, two_target_config

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
