"""Prefect task runners by name: where the scoring flow's batch tasks run.

- ``process`` (default): Prefect's ``ProcessPoolTaskRunner``, ``workers`` processes on
  this machine, each scoring one batch at a time in process.
- ``thread``: Prefect's ``ThreadPoolTaskRunner`` in the flow's process; a CPU scorer then
  spreads each batch over its own process pool (``ABLEAUDIT_SCORER_WORKERS``), as in dbt.
- ``dask``: ``prefect_dask.DaskTaskRunner`` (the prefect-dask package), on a local
  cluster of ``workers`` single-threaded processes, or on the Dask scheduler at
  ``address`` (a cluster of many machines).

A name maps to a factory in ``RUNNERS``; adding an engine is one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ableaudit.scorers.parallel import available_cores


@dataclass(frozen=True)
class Runner:
    name: str
    """The name on the command line (--task-runner)."""
    make: Callable[[int, str | None], Any]
    """(workers, address) -> a Prefect task runner, not yet entered."""
    in_process: bool
    """Whether each task runs in a worker process of its own (it then scores in process)."""
    help: str
    """One line for --help and the docs."""


def _process(workers: int, address: str | None) -> Any:
    from prefect.task_runners import ProcessPoolTaskRunner

    _no_address("process", address)
    return ProcessPoolTaskRunner(max_workers=workers)


def _thread(workers: int, address: str | None) -> Any:
    from prefect.task_runners import ThreadPoolTaskRunner

    _no_address("thread", address)
    return ThreadPoolTaskRunner(max_workers=workers)


def _dask(workers: int, address: str | None) -> Any:
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise RunnerError(
            "--task-runner dask needs the prefect-dask package (`pip install prefect-dask`); "
            "or use --task-runner process on this machine"
        ) from None
    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(
        cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True}
    )


def _no_address(name: str, address: str | None) -> None:
    if address:
        raise RunnerError(
            f"--dask-address names a Dask scheduler; --task-runner {name} runs on this machine "
            "(use --task-runner dask with it)"
        )


class RunnerError(ValueError):
    """A task runner that cannot be built; the message says what to change."""


RUNNERS: dict[str, Runner] = {
    r.name: r
    for r in (
        Runner("process", _process, True, "worker processes on this machine (default)"),
        Runner("thread", _thread, False, "threads of the flow's process"),
        Runner("dask", _dask, True, "a Dask cluster: local, or --dask-address (prefect-dask)"),
    )
}


def runner(name: str) -> Runner:
    if name not in RUNNERS:
        raise RunnerError(f"unknown task runner {name!r}; choose one of {', '.join(RUNNERS)}")
    return RUNNERS[name]


def default_workers() -> int:
    """One worker per core this process may use."""
    return available_cores()
