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
