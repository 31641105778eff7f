"""A target's generations: ask what is not landed yet, land the answers as they come back.

This is the work of the ``audit-target`` task (``ableaudit.audit.tasks``), kept free of
Prefect so it is the same code wherever it runs (the task, the kill drill). What a kill
can lose is bounded: answers land batch by batch, and a streaming backend sends no
request beyond its in-flight window ahead of the landing (``results_in_batches``), so a
kill loses at most ``window + batch - 1`` answers and a resumed run asks only for those.
A stop request (``ableaudit.stopping``: Ctrl-C or SIGTERM) cancels the backend: the
answers that finished land, and the target returns early.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from ableaudit import stopping
from ableaudit.audit.planning import TargetPlan
from ableaudit.backends import make_backend
from ableaudit.backends.base import (
    Backend,
    GenerationCancelled,
    GenerationResult,
    results_in_batches,
)
from ableaudit.records import LandingReport, PlannedGeneration
from ableaudit.warehouse.landing import land_generations, landed_keys, result_row

Log = Callable[..., Any]
"""Where progress goes: ``log(message, *args)`` (a logger's ``info``)."""


def generate_target(wh: str, plan: TargetPlan, run_id: str, log: Log) -> LandingReport:
    """One target's generations: what is not landed yet, one backend per adapter group.

    A retry (or a resumed audit) plans the same keys and asks only for those still missing.
    """
    total = LandingReport()
    for adapter, planned in plan.groups:
        done = landed_keys(wh, [p.generation_id for p in planned])
        todo = [p for p in planned if p.generation_id not in done]
        log(
            "target %s (adapter %s): %d planned, %d landed already, %d to generate",
            plan.target.name,
            adapter,
            len(planned),
            len(planned) - len(todo),
            len(todo),
        )
        if not todo:
            continue
        if stopping.requested() is not None:
            break
        backend = make_backend(plan.target, adapter=adapter)
        if stopping.requested() is not None:  # asked while the backend was loading
            backend.cancel()
        try:
            total += generate_and_land(wh, backend, plan.target.name, todo, run_id, log)
        finally:
            backend.close()
    return total


def generate_and_land(
    wh: str, backend: Backend, name: str, todo: list[PlannedGeneration], run_id: str, log: Log
) -> LandingReport:
    """Generate ``todo``, landing results in batches of the backend's concurrency as they come
    back; the next batch is pulled only once this one has landed.

    The progress bar moves per answer as it comes back (with its rate and time left); the
    log says after each landed batch how many have landed. When the backend is cancelled
    (the audit was asked to stop), the answers that finished land and it returns early.

    A row's ``model_revision`` is what the backend says answered it; a result that names none (an
    error) takes the backend's own, so the planned fingerprint stays only in the generation key.
    """
    plans = {p.generation_id: p for p in todo}
    revision = backend.model_revision
    total = LandingReport()
    done = 0
    size = backend.concurrency
    bar = tqdm(total=len(todo), desc=name, unit="answer", mininterval=0, miniters=1, smoothing=0.1)

    def tick(result: GenerationResult) -> None:
        bar.update(1)

    with bar, contextlib.suppress(GenerationCancelled):
        for results in results_in_batches(
            backend, [p.request() for p in todo], size, on_result=tick
        ):
            rows = []
            for r in results:
                row = result_row(plans[r.key], r, run_id)
                if not r.model_revision and revision:
                    row["model_revision"] = revision
                rows.append(row)
            total += land_generations(wh, rows)
            done += len(results)
            log("%s: %d/%d landed%s", name, done, len(todo), _pace(bar))
    if backend.cancelled:
        log("%s: stopped with %d of %d landed", name, done, len(todo))
    return total


def _pace(bar: tqdm) -> str:
    """', 2.1 answers/s, about 0:42 left' from a progress bar's own rate (empty before one)."""
    info = bar.format_dict
    rate = info.get("rate") or (info["n"] / info["elapsed"] if info.get("elapsed") else None)
    if not rate:
        return ""
    left = (info["total"] - info["n"]) / rate
    return f", {rate:.2f} answers/s, about {tqdm.format_interval(left)} left"
