"""Run dbt in-process against a given warehouse file.

``run_dbt(["build"], "warehouse/x.duckdb")`` is ``dbt build`` with the project's
profiles.yml and ABLEAUDIT_WAREHOUSE pointing at that file (the profile is the same for every
warehouse, so dbt's partial parse survives a switch to another file; ableaudit.dbt.plugin
attaches the file under a fixed database name). DuckDB allows one writer process: close your
own connections to the warehouse before calling.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ableaudit import PROJECT_ROOT
from ableaudit.stopping import interrupting_with
from ableaudit.warehouse import warehouse_path
from ableaudit.warehouse.connection import (
    WarehouseBusy,
    held,
    is_lock_error,
    wait_until_free,
)

WAIT_S = 120.0
"""How long a dbt run waits for a warehouse another process holds (as ``connect`` does)."""

_FAILED = {"error", "fail", "runtime error"}


class DbtError(RuntimeError):
    """dbt failed; the message lists the failing nodes and their messages, and for a data test
    failing on landed rows, the landings they came from and how to forget them."""


@contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def _argv(argv: list[str]) -> Iterator[None]:
    """dbt records ``sys.argv`` as the command it ran (``invocation_command`` in logs/dbt.log
    and target/): during the run it holds the command ableaudit chose, never the user's (which
    may carry a URL's credentials)."""
    old = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = old


def _release_duckdb() -> None:
    """Let go of the warehouse file after a run.

    dbt-duckdb keeps one DuckDB environment per process for the life of the
    process; its public ``close_all_connections`` drops it, and collecting the
    garbage closes the file, so the caller (and other processes) can open the
    warehouse again.
    """
    import gc

    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    DuckDBConnectionManager.close_all_connections()
    gc.collect()


_DUCKDB_ERROR = re.compile(r"\b[A-Z][A-Za-z]*( [A-Za-z]+)* Error: ")
"""The line of a DuckDB error that says what went wrong (``Binder Error: ...``)."""

_SQL_EXCERPT = re.compile(r"^LINE \d+:")


def failure_detail(message: str) -> str:
    """What a failing node's message says went wrong, in one line.

    DuckDB ends an error with the SQL it stopped at (``LINE 12: ...``) and a caret line under
    it, and an out-of-memory error with advice and a link: the line that names the error
    (with the lines after it, up to the SQL or a blank line) says what. Other messages (a
    data test's count, a Python model's exception, a macro's compilation error) say it on
    their last line before dbt's trace of the macros that raised it (``> in macro ...``)."""
    lines = [line.strip() for line in message.strip().splitlines()]
    for i, line in enumerate(lines):
        if _DUCKDB_ERROR.search(line):
            said = [line]
            for more in lines[i + 1 :]:
                if not more or _SQL_EXCERPT.match(more):
                    break
                said.append(more)
            return " ".join(said)
    meaningful = [
        line for line in lines if any(c.isalnum() for c in line) and not line.startswith(">")
    ]
    return meaningful[-1] if meaningful else ""


def _interrupted() -> type[KeyboardInterrupt]:
    """Ctrl-C as dbt takes it: a KeyboardInterrupt (dbt cancels its queries) that is also dbt's
    own exception (dbt reports it in one line, without a traceback)."""
    from dbt_common.exceptions import DbtBaseException

    class DbtInterrupted(KeyboardInterrupt, DbtBaseException):
        pass

    return DbtInterrupted


def _lock_error(res) -> BaseException | None:
    """DuckDB's lock error, when dbt could not open the warehouse because another process held it."""
    found = [res.exception] + [
        getattr(r, "message", None) for r in getattr(res.result, "results", None) or []
    ]
    return next((e for e in found if e is not None and is_lock_error(e)), None)


def _invoke_when_free(runner, argv: list[str], wh: Path):
    """dbt's result and invocation id once it could open the warehouse: dbt-duckdb opens the
    file itself and fails at once when another process holds it (a second build, a reader),
    so a run that failed on the lock before doing anything waits for the file, as ``connect``
    does, and runs again; after ``WAIT_S`` the error names the process holding it."""
    from dbt_common.invocation import get_invocation_id

    wait_s = WAIT_S
    deadline = time.monotonic() + wait_s
    while True:
        wait_until_free(wh, max(0.0, deadline - time.monotonic()))
        try:
            res = runner.invoke(argv)
            invocation_id = get_invocation_id()  # dbt draws a new one on each invoke
        finally:
            _release_duckdb()
        err = None if res.success else _lock_error(res)
        if err is None:
            return res, invocation_id
        if time.monotonic() > deadline:
            raise WarehouseBusy(held(wh, err, wait_s))
        time.sleep(0.5)


def _failures(result) -> list[str]:
    lines = []
    for r in getattr(result, "results", None) or []:
        status = str(getattr(r, "status", "")).lower()
        if status in _FAILED:
            node = getattr(r, "node", None)
            name = getattr(node, "unique_id", None) or getattr(node, "name", "?")
            failures = getattr(r, "failures", None)
            detail = failure_detail(getattr(r, "message", None) or "")
            if failures:
                detail = f"{failures} failing rows. {detail}".strip()
            lines.append(f"  - {name} [{status}]: {detail[:500]}")
    return lines


def run_dbt(
    args: Sequence[str],
    warehouse: str | os.PathLike | None = None,
    project_dir: str | os.PathLike = PROJECT_ROOT,
) -> str:
    """Invoke dbt (e.g. ``["build", "--vars", "{degradation_threshold: 0.2}"]``); raise DbtError
    on failure. Returns the invocation id, which the project's hooks record in the warehouse
    (``dbt_state.invocations``)."""
    from dbt.cli.main import dbtRunner

    project = Path(project_dir).resolve()
    wh = warehouse_path(warehouse)
    wh.parent.mkdir(parents=True, exist_ok=True)
    argv = [*args, "--project-dir", str(project), "--profiles-dir", str(project)]
    with (
        _env(ABLEAUDIT_WAREHOUSE=str(wh), ABLEAUDIT_PROJECT_DIR=str(project)),
        _argv(["dbt", *argv]),
    ):
        with interrupting_with(_interrupted()):
            res, invocation_id = _invoke_when_free(dbtRunner(), argv, wh)
    if isinstance(res.exception, KeyboardInterrupt):
        raise res.exception  # Ctrl-C: dbt cancelled its queries; the command stops
    if res.success:
        return invocation_id
    command = " ".join(["dbt", *args])
    lines = _failures(res.result)
    if res.exception is not None:
        lines.append(f"  - {type(res.exception).__name__}: {res.exception}")
    if lines and res.result is not None:
        from ableaudit.dbt.blame import blame

        lines += blame(getattr(res.result, "results", None) or [], wh, project)
    detail = "\n".join(lines) or "  (no failing node reported; see logs/dbt.log)"
    if "out of memory" in detail.lower():
        from ableaudit.warehouse.connection import MEMORY_LIMIT_ENV, memory_limit

        detail += (
            f"\n  DuckDB ran out of the memory it may use ({memory_limit() or 'its default'}); "
            f"raise ${MEMORY_LIMIT_ENV} (e.g. 8GB) and build again (docs/running.md#memory)"
        )
    raise DbtError(f"`{command}` failed on warehouse {wh}:\n{detail}")


ALL_TESTS_SELECTOR = "all_tests"
"""The selector of selectors.yml that builds every node and runs every data test; without it,
dbt's default selector leaves out the tests tagged ``full``."""


LANDED_ROWS_SELECTOR = "landed_rows_build"
"""The selector of selectors.yml that builds what the default one does, less what the
project, libraries and settings fix alone (``project_only_nodes``): the unit tests, the data
tests that read no landed row, the seeds, the views and the models that read no landed row."""


ANSWERS_LANDED_SELECTOR = "answers_landed_build"
"""The selector of selectors.yml that builds what ``LANDED_ROWS_SELECTOR`` does, less the nodes
that read none of ``ANSWER_TABLES``."""

UNGATED_SELECTOR = "default_build_ungated"
"""The selector of selectors.yml that builds what the default one does, less the gate_rule
tests: the audit flow's build, whose release gate reads gate_results after the publish."""

ANSWER_TABLES = frozenset(
    {"generations", "generation_errors", "generation_history", "landings", "runs"}
)
"""The raw tables a landing of answers (an audit, an import of responses, a forget) writes:
those whose descendants ``ANSWERS_LANDED_SELECTOR`` builds."""


def build(
    warehouse: str | os.PathLike | None = None,
    vars: str | None = None,
    all_tests: bool = False,
    project_checked: bool = False,
    changed_raw_tables: frozenset[str] | None = None,
    ungated: bool = False,
) -> str:
    """Load the seeds, build and test every model, in one ``dbt build``: the default selection
    of data tests, or every test with ``all_tests``. ``project_checked`` (the project,
    libraries and settings are those of the last build that succeeded) leaves out the unit
    tests and the data tests that read no landed row, which passed on them then, and the
    seeds, views and models that read no landed row, which that build left as they would be
    built again; with ``changed_raw_tables`` (the raw tables that differ from what that build
    read) among ``ANSWER_TABLES``, it also leaves out the nodes that read none of those. Neither
    has an effect with ``all_tests``. ``ungated`` builds ``UNGATED_SELECTOR`` (nothing left
    out). Returns the dbt invocation id."""
    extra = ["--vars", vars] if vars else []
    if ungated:
        extra += ["--selector", UNGATED_SELECTOR]
    elif all_tests:
        extra += ["--selector", ALL_TESTS_SELECTOR]
    elif project_checked and changed_raw_tables is not None and changed_raw_tables <= ANSWER_TABLES:
        extra += ["--selector", ANSWERS_LANDED_SELECTOR]
    elif project_checked:
        extra += ["--selector", LANDED_ROWS_SELECTOR]
    return run_dbt(["build", *extra], warehouse)
