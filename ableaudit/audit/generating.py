"""A target's generations: ask what is not landed yet, land the answers as they come back.

This is the work of the ``audit-target`` task (``ableaudit.audit.tasks``), kept free of
Prefect so it is the same code wherever it runs (the task, the kill drill). What a kill
can lose is bounded: answers land batch by batch, and a streaming backend sends no
request beyond its in-flight window ahead of the landing (``results_in_batches``), so a
kill loses at most ``window + batch - 1`` answers and a resumed run asks only for those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from ableaudit.audit.planning import TargetPlan
from ableaudit.backends import make_backend
from ableaudit.backends.base import Backend, results_in_batches
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
        backend = make_backend(plan.target, adapter=adapter)
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

    A row's ``model_revision`` is what the backend says answered it; a result that names none (an
    error) takes the backend's own, so the planned fingerprint stays only in the generation key.
    """
    plans = {p.generation_id: p for p in todo}
    revision = backend.model_revision
    total = LandingReport()
    done = 0
    size = backend.concurrency
    with tqdm(total=len(todo), desc=name, unit="gen") as bar:
        for results in results_in_batches(backend, [p.request() for p in todo], size):
            rows = []
            for r in results:
                row = result_row(plans[r.key], r, run_id)
                if not r.model_revision and revision:
                    row["model_revision"] = revision
                rows.append(row)
            total += land_generations(wh, rows)
            done += len(results)
            bar.update(len(results))
            log("%s: %d/%d landed", name, done, len(todo))
    return total
