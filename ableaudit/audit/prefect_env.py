"""Prefect settings that must be in place before `import prefect`.

A fresh ephemeral Prefect server needs ~22 s of migrations here, longer than
Prefect's 20 s default, and the project keeps Prefect's state inside the repo.
"""

from __future__ import annotations

import os

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
