"""The `score` flow: the per-text scorers as a Prefect map over text batches.

The flow finds the texts each scorer has not scored (read-only), reads them in
groups of ``group_batches`` Arrow batches of ``batch_size`` texts, maps one task
per batch and scorer on the task runner named (``ableaudit.scoring.runners``),
collects the scores in the flow's process and lands each group in one writer
transaction (``raw.text_scores``). The next group is read and submitted before the
current one is collected, so workers stay busy while the flow lands.

One run is one landing (kind 'score'): ``ableaudit forget`` removes its rows. A run
stopped midway keeps the groups it landed, and running it again scores only the
rest; a run with nothing left to score lands nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ableaudit.audit import prefect_env

prefect_env.configure()

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from ableaudit.scorers import parallel  # noqa: E402
from ableaudit.scoring import runners, texts  # noqa: E402
from ableaudit.warehouse import warehouse_path  # noqa: E402
from ableaudit.warehouse.landing import land_text_scores, recording  # noqa: E402

DEFAULT_BATCH_SIZE = 2048


@task(name="score-batch", cache_policy=NO_CACHE, persist_result=False)
def score_batch(scorer: str, batch: pa.RecordBatch, in_process: bool) -> pa.Table:
    """One batch of texts scored by one scorer: the rows of raw.text_scores."""
    return texts.score_batch(scorer, batch, in_process=in_process)


@flow(name="score", log_prints=True)
def score(
    warehouse: str | None = None,
    scorers: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    task_runner: str = "thread",
    workers: int | None = None,
    group_batches: int | None = None,
    dask_address: str | None = None,
) -> dict[str, Any]:
    """Score every text the scorers have not scored and land the scores; returns what it did.

    ``workers``: the task runner's workers (default: the available cores; a Dask
    scheduler at ``dask_address`` has its own). ``group_batches``: batches landed per
    transaction (default: twice the workers).
    """
    if batch_size < 1:
        raise texts.ScoringError(f"batch_size must be at least 1, got {batch_size}")
    names = texts.check_scorers(list(scorers or texts.default_scorers()))
    chosen = runners.runner(task_runner)
    size = workers or runners.default_workers()
    group = group_batches or 2 * size
    if size < 1 or group < 1:
        raise texts.ScoringError("workers and group_batches must be at least 1")
    wh = str(warehouse_path(warehouse))
    logger = get_run_logger()
    started = time.perf_counter()
    pending = texts.pending_texts(wh, names)
    summary: dict[str, Any] = {
        "warehouse": wh,
        "task_runner": chosen.name,
        "workers": size,
        "pending": {n: pending.count(n) for n in names},
        "scored": {n: 0 for n in names},
        "landed": 0,
        "unchanged": 0,
        "groups": 0,
        "landing_id": None,
    }
    logger.info("texts to score: %s", summary["pending"])
    if not pending.keys.num_rows:
        summary["seconds"] = time.perf_counter() - started
        return summary
    rows_per_group = group * batch_size
    with recording(wh, "score", f"scorers {', '.join(names)}") as landing:
        with (
            _pool_size(None if chosen.in_process else size),
            chosen.make(size, dask_address) as runner,
        ):
            submitted = None
            for start in range(0, pending.keys.num_rows, rows_per_group):
                keys = pending.keys.slice(start, rows_per_group)
                current = [
                    runner.submit(
                        score_batch,
                        {"scorer": name, "batch": batch, "in_process": chosen.in_process},
                    )
                    for batch in texts.read_batches(wh, keys, batch_size)
                    for name in names
                    if pc.any(batch.column(f"needs_{name}")).as_py()
                ]
                if submitted is not None:
                    _land(wh, submitted, summary, logger)
                submitted = current
            _land(wh, submitted or [], summary, logger)
        summary["landing_id"] = landing.landing_id if landing.wrote else None
    summary["seconds"] = time.perf_counter() - started
    logger.info("scored in %.1f s: %s", summary["seconds"], summary["scored"])
    return summary


@contextmanager
def _pool_size(size: int | None) -> Iterator[None]:
    """Tasks in this process (threads) spread a batch over the scorer's process pool of
    ``size`` workers; tasks in worker processes of their own score in process."""
    if size is None:
        yield
        return
    before = os.environ.get(parallel.WORKERS_ENV)
    os.environ[parallel.WORKERS_ENV] = str(size)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(parallel.WORKERS_ENV, None)
        else:
            os.environ[parallel.WORKERS_ENV] = before


def _land(wh: str, futures: list, summary: dict[str, Any], logger) -> None:
    """Collect one group's scores and land them in one transaction."""
    tables = [f.result() for f in futures]
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return
    scores = pa.concat_tables(tables, promote_options="permissive")
    report = land_text_scores(wh, scores)
    for name, n in zip(*pc.value_counts(scores["scorer"]).flatten()):
        summary["scored"][name.as_py()] += n.as_py()
    summary["landed"] += report.inserted
    summary["unchanged"] += report.unchanged
    summary["groups"] += 1
    logger.info("landed %d scores (%d already landed)", report.inserted, report.unchanged)
