"""How ``runners.fan_out`` schedules chunks and lands what comes back, with a stand-in cluster.

The stand-in runs each submitted chunk on a thread pool and answers it from its prompt text,
so the scheduling (one chunk in flight per target, ``parallel_targets`` targets at once, a
failed target's later chunks never sent) and the landing are checked without Prefect.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import duckdb
import pytest

from ableaudit.audit import runners
from ableaudit.backends.base import GenerationResult
from ableaudit.config import ConfigError, TaskRunnerSettings
from ableaudit.records import PlannedGeneration
from ableaudit.warehouse.landing import result_row
from tests.fixtures.planned import planned_generation


def _planned(target: str, i: int) -> PlannedGeneration:
    return planned_generation(
        i,
        generation_id=f"{target}-{i:03d}",
        target=target,
        model_id=target,
        prompt_text=f"prompt {i} for {target}",
    )


def _plan(name: str, n: int):
    return SimpleNamespace(
        target=SimpleNamespace(name=name), groups=[(None, [_planned(name, i) for i in range(n)])]
    )


class Cluster:
    """Runs chunks on threads; ``fail`` names (target, chunk number) pairs that raise."""

    def __init__(self, fail=()):
        self.pool = ThreadPoolExecutor(max_workers=8)
        self.fail = set(fail)
        self.lock = threading.Lock()
        self.inflight: dict[str, int] = {}
        self.max_per_target = 0
        self.max_total = 0
        self.sent: dict[str, int] = {}

    def submit(self, runner, params):
        name = params["target"].name
        with self.lock:
            number = self.sent[name] = self.sent.get(name, 0) + 1
            self.inflight[name] = self.inflight.get(name, 0) + 1
            self.max_per_target = max(self.max_per_target, self.inflight[name])
            self.max_total = max(self.max_total, sum(self.inflight.values()))
        return self.pool.submit(self._run, name, number, params)

    def _run(self, name, number, params):
        time.sleep(0.02)
        try:
            if (name, number) in self.fail:
                raise RuntimeError(f"{name} chunk {number} failed")
            return [
                result_row(
                    p,
                    GenerationResult(key=p.generation_id, text=p.prompt_text[::-1], status="ok"),
                    params["run_id"],
                )
                for p in params["todo"]
            ]
        finally:
            with self.lock:
                self.inflight[name] -= 1


# chunks of 4 on the thread kind (which a config refuses): the runner entered is a thread pool,
# and the stand-in cluster's ``submit`` runs the chunks
SETTINGS = TaskRunnerSettings.model_construct(chunk_size=4)


def _landed(wh) -> dict[str, int]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return dict(
            con.execute("select target, count(*) from raw.generations group by 1").fetchall()
        )
    finally:
        con.close()


def test_one_chunk_per_target_in_flight_and_parallel_targets_at_once(warehouse):
    plans = [_plan("a", 10), _plan("b", 9), _plan("c", 5)]
    cluster = Cluster()
    totals, failed = runners.fan_out(
        str(warehouse), plans, "r1", SETTINGS, 2, cluster.submit, print
    )
    assert failed == []
    assert _landed(warehouse) == {"a": 10, "b": 9, "c": 5}
    assert {k: v["inserted"] for k, v in totals.items()} == {"a": 10, "b": 9, "c": 5}
    assert cluster.sent == {"a": 3, "b": 3, "c": 2}  # chunks of 4
    assert cluster.max_per_target == 1 and cluster.max_total == 2


def test_a_failed_chunk_fails_its_target_only_and_a_rerun_sends_what_is_missing(warehouse):
    plans = [_plan("good", 8), _plan("bad", 12)]
    cluster = Cluster(fail={("bad", 2)})
    totals, failed = runners.fan_out(
        str(warehouse), plans, "r1", SETTINGS, 2, cluster.submit, print
    )
    assert failed == ["bad: bad chunk 2 failed"] and list(totals) == ["good"]
    assert cluster.sent == {"good": 2, "bad": 2}  # bad's third chunk was never sent
    assert _landed(warehouse) == {"good": 8, "bad": 4}  # its first chunk landed

    again = Cluster()
    totals, failed = runners.fan_out(str(warehouse), plans, "r2", SETTINGS, 2, again.submit, print)
    assert failed == [] and again.sent == {"bad": 2}  # 8 missing, in chunks of 4
    assert _landed(warehouse) == {"good": 8, "bad": 12}


def test_a_stop_sends_nothing_more_and_lands_what_is_in_flight(warehouse, monkeypatch):
    plans = [_plan("a", 12), _plan("b", 12)]
    cluster = Cluster()
    real_land = runners.land_generations

    def land_then_stop(wh, rows):
        report = real_land(wh, rows)
        runners.stopping.request(15)
        return report

    monkeypatch.setattr(runners, "land_generations", land_then_stop)
    monkeypatch.setattr(runners.stopping, "cancel_backends", lambda: None)
    try:
        runners.fan_out(str(warehouse), plans, "r1", SETTINGS, 2, cluster.submit, print)
    finally:
        runners.stopping.reset()
    assert cluster.sent == {"a": 1, "b": 1}  # the two first chunks, nothing after the stop
    assert _landed(warehouse) == {"a": 4, "b": 4}  # both landed, the one in flight too


def test_the_runner_of_each_kind(monkeypatch):
    from prefect.task_runners import ThreadPoolTaskRunner

    assert isinstance(runners.make_task_runner(TaskRunnerSettings(), 3), ThreadPoolTaskRunner)
    pytest.importorskip("prefect_dask")
    local = runners.make_task_runner(
        TaskRunnerSettings(kind="dask", n_workers=3, processes=False), 2
    )
    assert local.address is None
    assert local.cluster_kwargs == {
        "n_workers": 3,
        "threads_per_worker": 1,
        "processes": False,
        "dashboard_address": None,
    }
    remote = runners.make_task_runner(TaskRunnerSettings(kind="dask", address="tcp://h:8786"), 2)
    assert remote.address == "tcp://h:8786"
    monkeypatch.setattr(runners, "missing_packages", lambda kind: ["prefect_ray", "ray"])
    with pytest.raises(ConfigError, match="kind ray needs prefect_ray, ray, not installed here"):
        runners.make_task_runner(TaskRunnerSettings(kind="ray"), 2)
