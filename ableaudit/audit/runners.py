"""Where target generations run: the Prefect task runner a config's ``task_runner:`` names.

``thread`` (the default) keeps what the audit always did: ``parallel_targets`` targets at once
on threads of the flow's process, each landing its own answers as they come back. ``dask`` and
``ray`` hand the work to a cluster (prefect-dask's ``DaskTaskRunner``, prefect-ray's
``RayTaskRunner``): each target's missing prompts are cut into chunks of ``chunk_size``, each
chunk is one ``generate-chunk`` task on a worker (which talks to the target's own servers and
returns the rows), and the flow's process lands every row. The judges go the same way: each
chunk of a judge's verdicts still to obtain is one ``judge-chunk`` task. One writer: a worker
never opens the warehouse. See docs/scale-out.md.
"""

from __future__ import annotations

import importlib.util
import queue
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ableaudit import stopping
from ableaudit.audit.planning import TargetPlan
from ableaudit.config import ConfigError, TaskRunnerSettings
from ableaudit.records import LandingReport
from ableaudit.warehouse.landing import land_generations, landed_keys

Log = Callable[..., Any]
T = TypeVar("T")

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


def chunked(items: Sequence[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


@dataclass
class Stream:
    """One line of chunks sent one at a time: a target's prompts, or a judge's verdicts.

    ``chunks`` holds each chunk's task parameters and what it is part of, in order;
    ``land(part, result)`` lands what a chunk returned, in the flow's process.
    """

    name: str
    land: Callable[[Any, Any], None]
    chunks: deque = field(default_factory=deque)
    error: BaseException | None = None


def run_streams(
    streams: Sequence[Stream],
    settings: TaskRunnerSettings,
    parallel: int,
    submit_chunk: Callable[[Any, dict[str, Any]], Any],
    log: Log,
) -> list[str]:
    """Send every stream's chunks to the cluster and land what comes back; the failures.

    Each stream has one chunk in flight at a time (so a server sees its target's own
    ``batch_size`` of requests, as on threads), and ``parallel`` streams run at once. A
    failed chunk (after its task's retries) fails its stream, whose later chunks are not
    sent; the others go on. After a stop request no chunk is sent: those in flight are
    waited for and land (a worker in this process stops early with what finished; one
    elsewhere finishes its chunk), then this returns. ``submit_chunk(runner, parameters)``
    submits one chunk's task.
    """
    finished: queue.Queue = queue.Queue()
    inflight: dict[Any, tuple[Stream, Any]] = {}
    waiting = deque(s for s in streams if s.chunks)

    with make_task_runner(settings, parallel) as runner:

        def submit(stream: Stream) -> None:
            params, part = stream.chunks.popleft()
            future = submit_chunk(runner, params)
            inflight[future] = (stream, part)
            future.add_done_callback(finished.put)

        while waiting and len(inflight) < parallel and stopping.requested() is None:
            submit(waiting.popleft())
        while inflight:
            future = finished.get()
            stream, part = inflight.pop(future)
            try:
                result = future.result()
            except BaseException as err:  # the task failed after its retries
                stream.error, stream.chunks = err, deque()
                log("%s: a chunk failed: %s", stream.name, err)
            else:
                stream.land(part, result)
            if stopping.requested() is not None:
                continue  # land what is in flight, send nothing more
            if stream.chunks:
                submit(stream)
            elif waiting:
                submit(waiting.popleft())
    return [f"{s.name}: {s.error}" for s in streams if s.error is not None]


@dataclass
class _Target:
    todo: int = 0
    landed: int = 0
    report: LandingReport = field(default_factory=LandingReport)


def fan_out(
    wh: str,
    plans: Sequence[TargetPlan],
    run_id: str,
    settings: TaskRunnerSettings,
    parallel_targets: int,
    submit_chunk: Callable[[Any, dict[str, Any]], Any],
    log: Log,
) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Generate every plan's missing prompts on the cluster, landing each chunk as it returns
    (``run_streams``: one stream per target, ``parallel_targets`` targets at once).
    ``submit_chunk`` submits one ``generate-chunk`` task. Returns the totals of each target
    and the failures."""
    states: dict[str, _Target] = {}
    streams = []
    for plan in plans:
        name = plan.target.name
        state = states[name] = _Target()

        def land(part: None, rows: Any, name: str = name, state: _Target = state) -> None:
            state.report += land_generations(wh, rows)
            state.landed += len(rows)
            log("%s: %d/%d landed", name, state.landed, state.todo)

        stream = Stream(name, land)
        for adapter, planned in plan.groups:
            done = landed_keys(wh, [p.generation_id for p in planned])
            todo = [p for p in planned if p.generation_id not in done]
            log(
                "target %s (adapter %s): %d planned, %d landed already, %d to generate in "
                "chunks of %d on %s",
                name,
                adapter,
                len(planned),
                len(planned) - len(todo),
                len(todo),
                settings.chunk_size,
                settings.kind,
            )
            state.todo += len(todo)
            stream.chunks.extend(
                ({"target": plan.target, "adapter": adapter, "todo": c, "run_id": run_id}, None)
                for c in chunked(todo, settings.chunk_size)
            )
        streams.append(stream)
    failed = run_streams(streams, settings, parallel_targets, submit_chunk, log)
    totals = {s.name: states[s.name].report.__dict__ for s in streams if s.error is None}
    return totals, failed


def fan_out_judges(
    wh: str,
    jobs: Sequence[Any],
    run_id: str,
    settings: TaskRunnerSettings,
    parallel: int,
    submit_chunk: Callable[[Any, dict[str, Any]], Any],
    log: Log,
) -> list[str]:
    """Ask the judges for every job's verdicts on the cluster, landing each chunk as it returns.

    ``jobs`` are ``ableaudit.judges.runner.JudgeJob``: the verdicts of a judge and kind not
    landed yet. Each judge is one stream (its kinds one after another, one chunk in flight,
    so its server sees the judge's own ``batch_size``), ``parallel`` judges at once.
    ``submit_chunk`` submits one ``judge-chunk`` task. Each job's report gets what landed;
    a failed judge's later chunks are not sent (its verdicts are asked again by a re-run).
    Returns the failures.
    """
    from ableaudit.judges.runner import JudgeReport, land_judged

    def land(job: Any, result: dict[str, Any]) -> None:
        land_judged(wh, job.report, result["rows"], JudgeReport(**result["counts"]))
        # every call of the job so far is a landed row (an error is one too)
        log(
            "judge %s, %s: %d/%d landed", job.judge.name, job.kind, job.report.called, len(job.todo)
        )

    streams: dict[str, Stream] = {}
    for job in jobs:
        name = job.judge.name
        stream = streams.setdefault(name, Stream(f"judge {name}", land))
        log(
            "judge %s, %s: %d verdicts to obtain in chunks of %d on %s",
            name,
            job.kind,
            len(job.todo),
            settings.chunk_size,
            settings.kind,
        )
        stream.chunks.extend(
            ({"judge": job.judge, "items": c, "run_id": run_id}, job)
            for c in chunked(job.todo, settings.chunk_size)
        )
    return run_streams(list(streams.values()), settings, parallel, submit_chunk, log)
