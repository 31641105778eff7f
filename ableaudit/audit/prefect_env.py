"""Prefect settings that must be in place before `import prefect`.

A fresh ephemeral Prefect server needs ~22 s of migrations here, longer than
Prefect's 20 s default, and the project keeps Prefect's state inside the repo.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ableaudit import PROJECT_ROOT

DEFAULTS = {
    "PREFECT_HOME": str(PROJECT_ROOT / ".prefect"),
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_TO_API_BATCH_INTERVAL": "0.5",
}


def configure() -> None:
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


QUIET_FAILURES = (
    "AbleauditError",
    "AuditIncomplete",
    "AuditInterrupted",
    "GateBlocked",
    "RunConflict",
)
"""Exceptions whose message says all (an audit refused, incomplete, interrupted, a gate that
blocks): Prefect logs them without their traceback unless ``--debug`` asks for it."""


def quiet_tracebacks() -> None:
    """Log the ``QUIET_FAILURES`` that Prefect reports (``Encountered exception during
    execution``, a task's failure) as their message alone: the command prints its own one line."""
    import logging

    make = logging.getLogRecordFactory()
    if getattr(make, "quiet_tracebacks", False):
        return

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = make(*args, **kwargs)
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and {c.__name__ for c in type(exc).__mro__} & set(QUIET_FAILURES):
            record.exc_info, record.exc_text = None, None
        return record

    factory.quiet_tracebacks = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


CONSOLE_LEVEL = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"
"""Prefect's setting of its terminal handler's level (its logging.yml, ``handlers.console``)."""

DBT_LOG_LEVEL = "DBT_LOG_LEVEL"
"""dbt's setting of its terminal log level (``--log-level``)."""

DBT_LOG_LEVEL_FILE = "DBT_LOG_LEVEL_FILE"
"""dbt's setting of logs/dbt.log's level (``--log-level-file``): debug, as dbt's default; set
with ``DBT_LOG_LEVEL``, which dbt would take for the file too."""


@contextmanager
def terminal(verbose: bool) -> Iterator[None]:
    """What a command prints while it runs. Quiet (the default): Prefect's and dbt's warnings
    and errors, with what the command prints itself (progress bars, its summary); the run logs
    still go to the Prefect API and logs/dbt.log. ``verbose``: every line of both."""
    import logging

    level = "NOTSET" if verbose else "WARNING"
    values = {
        CONSOLE_LEVEL: level,
        DBT_LOG_LEVEL: "info" if verbose else "warn",
        DBT_LOG_LEVEL_FILE: os.environ.get(DBT_LOG_LEVEL_FILE, "debug"),
    }
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)  # read when Prefect configures its logging (on import, by a server)
    handlers = _console_handlers()
    levels = [h.level for h in handlers]
    for h in handlers:  # Prefect imported already: its handlers as configured then
        h.setLevel(logging.getLevelName(level))
    try:
        yield
    finally:
        for h, was in zip(handlers, levels):
            h.setLevel(was)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _console_handlers() -> list:
    """Prefect's terminal handlers, when Prefect has configured its logging in this process."""
    import logging
    import sys

    if "prefect.logging.handlers" not in sys.modules:
        return []
    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    found = {
        id(h): h
        for lg in loggers
        for h in getattr(lg, "handlers", [])
        if isinstance(h, PrefectConsoleHandler)
    }
    return list(found.values())
