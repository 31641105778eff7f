"""Prefect task runners by name: where the scoring flow's batch tasks run.

- ``thread`` (default): Prefect's ``ThreadPoolTaskRunner`` in the flow's process, ``workers``
  tasks at a time; a CPU scorer spreads each batch over its own pool of ``workers``
  processes (``ableaudit.scorers.parallel``, as in dbt), started once.
- ``dask``: ``prefect_dask.DaskTaskRunner`` (the prefect-dask package), on a local
  cluster of ``workers`` single-threaded processes, or on the Dask scheduler at
  ``address`` (a cluster of many machines).

A name maps to a factory in ``RUNNERS``; adding an engine is one entry. Prefect's
``ProcessPoolTaskRunner`` is not one: measured here, each of its worker processes
started a Prefect server of its own and held the run ~60 s at its end, and each task
paid about a second of start-up; the thread runner's process pool scores the same
texts on the same cores without either.
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


def _thread(workers: int, address: str | None) -> Any:
    from prefect.task_runners import ThreadPoolTaskRunner

    _no_address("thread", address)
    return ThreadPoolTaskRunner(max_workers=workers)


def _cluster(kind: str) -> Callable[[int, str | None], Any]:
    """The audit's own cluster runner (ableaudit.audit.runners) for ``kind``: a local cluster
    of ``workers`` single-threaded worker processes, or the scheduler at ``address``."""

    def make(workers: int, address: str | None) -> Any:
        from ableaudit.audit.runners import make_task_runner
        from ableaudit.config import ConfigError, TaskRunnerSettings

        sized = {"address": address} if address else {"n_workers": workers}
        settings = TaskRunnerSettings(kind=kind, **sized)
        try:
            return make_task_runner(settings, workers)
        except ConfigError as e:
            raise RunnerError(f"--task-runner {kind}: {e}; or use --task-runner thread") from None

    return make


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
        Runner("thread", _thread, False, "tasks in threads, texts on a process pool (default)"),
        Runner(
            "dask",
            _cluster("dask"),
            True,
            "a Dask cluster: local, or --dask-address (prefect-dask)",
        ),
    )
}


def runner(name: str) -> Runner:
    if name not in RUNNERS:
        raise RunnerError(f"unknown task runner {name!r}; choose one of {', '.join(RUNNERS)}")
    return RUNNERS[name]


def default_workers() -> int:
    """One worker per core this process may use."""
    return available_cores()
