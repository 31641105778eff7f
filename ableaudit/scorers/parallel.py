"""Per-text scorers on every core: a process pool that splits a batch of texts into slices.

DuckDB calls a Python scorer with one vector of texts at a time and holds the
GIL while it runs, so threads would not help: CPU-bound scorers (VADER, the
refusal rules) hand their batch to worker processes instead. The results are
the same function's, in the same order, bit for bit.

The pool has one worker per core available to this process
(``os.sched_getaffinity``), or ``ABLEAUDIT_SCORER_WORKERS`` when set (``1``
turns the pool off). Batches under ``MIN_PARALLEL_TEXTS`` texts run in
process: the round trip would cost more than it saves. Workers are spawned,
not forked, so they never inherit DuckDB's threads or open files, and are
created once per process, when the first large batch arrives.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

from ableaudit.cores import available_cores

T = TypeVar("T")

WORKERS_ENV = "ABLEAUDIT_SCORER_WORKERS"
MIN_PARALLEL_TEXTS = 256

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_pool_size = 0


def worker_count() -> int:
    """How many processes score a large batch: ``ABLEAUDIT_SCORER_WORKERS`` or the available cores."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if not raw:
        return available_cores()
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(
            f"{WORKERS_ENV}={raw!r} is not a whole number; set it to the number of scoring "
            "processes (1 scores in process), or unset it to use every available core"
        ) from None
    if value < 1:
        raise ValueError(f"{WORKERS_ENV}={value} must be at least 1 (1 scores in process)")
    return value


def _executor(size: int) -> ProcessPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != size:
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            _pool = ProcessPoolExecutor(
                max_workers=size, mp_context=multiprocessing.get_context("spawn")
            )
            _pool_size = size
        return _pool


def shutdown() -> None:
    """Stop the worker processes (at exit, or in a test that wants a fresh pool)."""
    global _pool, _pool_size
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=True, cancel_futures=True)
        _pool, _pool_size = None, 0


atexit.register(shutdown)


def map_batches(
    function: Callable[[list[str | None]], list[T]],
    texts: Sequence[str | None],
    workers: int | None = None,
) -> list[T]:
    """``function(texts)``, computed in ``workers`` contiguous slices in parallel and concatenated.

    ``function`` must be a module-level function (the workers import it by name)
    that maps a list of texts to a list of values of the same length.
    """
    texts = list(texts)
    size = worker_count() if workers is None else workers
    if size <= 1 or len(texts) < MIN_PARALLEL_TEXTS:
        return function(texts)
    step = -(-len(texts) // size)
    slices = [texts[i : i + step] for i in range(0, len(texts), step)]
    out: list[T] = []
    for part in _executor(size).map(function, slices):
        out.extend(part)
    if len(out) != len(texts):
        raise RuntimeError(
            f"scorer {function.__qualname__} returned {len(out)} values for {len(texts)} texts"
        )
    return out
