"""Where target generations run: the Prefect task runner a config's ``task_runner:`` names.

``thread`` (the default) keeps what the audit always did: ``parallel_targets`` targets at once
on threads of the flow's process, each landing its own answers as they come back. ``dask`` and
``ray`` hand the work to a cluster (prefect-dask's ``DaskTaskRunner``, prefect-ray's
``RayTaskRunner``): each target's missing prompts are cut into chunks of ``chunk_size``, each
chunk is one ``generate-chunk`` task on a worker (which talks to the target's own servers and
returns the rows), and the flow's process lands every row. One writer: a worker never opens
the warehouse. See docs/scale-out.md.
"""

from __future__ import annotations

import importlib.util
import queue
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ableaudit.audit import stopping
from ableaudit.audit.planning import TargetPlan
from ableaudit.config import ConfigError, TaskRunnerSettings
from ableaudit.records import LandingReport, PlannedGeneration
from ableaudit.warehouse.landing import land_generations, landed_keys

Log = Callable[..., Any]

# The packages each cluster kind needs, and how to get them (requirements-scale.lock pins them).
CLUSTER_PACKAGES = {
    "dask": ("prefect_dask", "distributed"),
    "ray": ("prefect_ray", "ray"),
}
INSTALL_HINT = {
    "dask": "pip install -r requirements-scale.lock (prefect-dask, dask distributed)",
    "ray": "pip install 'ray[data]' prefect-ray (a version matching the cluster's Ray)",
}


def missing_packages(kind: str) -> list[str]:
    """The packages of ``kind`` that are not importable here (empty for ``thread``)."""
    return [m for m in CLUSTER_PACKAGES.get(kind, ()) if importlib.util.find_spec(m) is None]


def lands_in_flow(settings: TaskRunnerSettings) -> bool:
    """True when workers return rows and the flow's process lands them (dask, ray)."""
    return settings.kind != "thread"


def make_task_runner(settings: TaskRunnerSettings, parallel_targets: int) -> Any:
    """The Prefect task runner of ``settings``, not yet started (use it as a context manager)."""
    if settings.kind == "thread":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=parallel_targets)
    missing = missing_packages(settings.kind)
    if missing:
        raise ConfigError(
            f"task_runner: kind {settings.kind} needs {', '.join(missing)}, not installed here: "
            f"{INSTALL_HINT[settings.kind]}"
        )
    if settings.kind == "dask":
        from prefect_dask import DaskTaskRunner

        if not settings.local:
            return DaskTaskRunner(address=settings.address)
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": settings.n_workers or parallel_targets,
                "threads_per_worker": settings.threads_per_worker,
                "processes": settings.processes,
                "dashboard_address": None,
            }
        )
    from prefect_ray import RayTaskRunner

    if not settings.local:
        return RayTaskRunner(address=settings.address)
    init: dict[str, Any] = {"include_dashboard": False}
    if settings.n_workers:
        init["num_cpus"] = settings.n_workers
    return RayTaskRunner(init_kwargs=init)


def chunked(items: Sequence[PlannedGeneration], size: int) -> Iterator[list[PlannedGeneration]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


@dataclass
class _Target:
    plan: TargetPlan
    chunks: deque = field(default_factory=deque)  # (adapter, [PlannedGeneration])
    todo: int = 0
    landed: int = 0
    report: LandingReport = field(default_factory=LandingReport)
    error: BaseException | None = None


def fan_out(
    wh: str,
    plans: Sequence[TargetPlan],
    run_id: str,
    settings: TaskRunnerSettings,
    parallel_targets: int,
    submit_chunk: Callable[[Any, dict[str, Any]], Any],
    log: Log,
) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Generate every plan's missing prompts on the cluster, landing each chunk as it returns.

    Each target has one chunk in flight at a time (so its servers see the target's own
    ``batch_size`` of requests, as on threads), and ``parallel_targets`` targets run at once.
    A failed chunk (after its task's retries) fails its target, whose later chunks are not
    sent; the other targets go on. After a stop request no chunk is sent: those in flight
    are waited for and land (a worker in this process stops early with what finished; one
    elsewhere finishes its chunk), then this returns. ``submit_chunk(runner, parameters)``
    submits one ``generate-chunk`` task. Returns the totals of each target and the failures.
    """
    states = []
    for plan in plans:
        state = _Target(plan)
        for adapter, planned in plan.groups:
            done = landed_keys(wh, [p.generation_id for p in planned])
            todo = [p for p in planned if p.generation_id not in done]
            log(
                "target %s (adapter %s): %d planned, %d landed already, %d to generate in "
                "chunks of %d on %s",
                plan.target.name,
                adapter,
                len(planned),
                len(planned) - len(todo),
                len(todo),
                settings.chunk_size,
                settings.kind,
            )
            state.todo += len(todo)
            state.chunks.extend((adapter, c) for c in chunked(todo, settings.chunk_size))
        states.append(state)

    finished: queue.Queue = queue.Queue()
    inflight: dict[Any, _Target] = {}
    waiting = deque(s for s in states if s.chunks)

    with make_task_runner(settings, parallel_targets) as runner:

        def submit(state: _Target) -> None:
            adapter, chunk = state.chunks.popleft()
            params = {"target": state.plan.target, "adapter": adapter, "todo": chunk}
            future = submit_chunk(runner, {**params, "run_id": run_id})
            inflight[future] = state
            future.add_done_callback(finished.put)

        while waiting and len(inflight) < parallel_targets and stopping.requested() is None:
            submit(waiting.popleft())
        while inflight:
            future = finished.get()
            state = inflight.pop(future)
            name = state.plan.target.name
            try:
                rows = future.result()
            except BaseException as err:  # the task failed after its retries
                state.error, state.chunks = err, deque()
                log("target %s: a chunk failed: %s", name, err)
            else:
                state.report += land_generations(wh, rows)
                state.landed += len(rows)
                log("%s: %d/%d landed", name, state.landed, state.todo)
            if stopping.requested() is not None:
                continue  # land what is in flight, send nothing more
            if state.chunks:
                submit(state)
            elif waiting:
                submit(waiting.popleft())

    totals = {s.plan.target.name: s.report.__dict__ for s in states if s.error is None}
    failed = [f"{s.plan.target.name}: {s.error}" for s in states if s.error is not None]
    return totals, failed
