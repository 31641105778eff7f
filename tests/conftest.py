"""Shared fixtures: a temporary warehouse, and Prefect kept inside the test run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Fixtures shared across the suite, registered as plugins (their helper functions are
# imported by module path, e.g. `from tests.fixtures.tiny_vlm import png_bytes`).
pytest_plugins = [
    "tests.fixtures.tiny_models",
    "tests.fixtures.tiny_vlm",
    "tests.fixtures.warehouse",
    "tests.fixtures.report_world",
    "tests.fixtures.webhook_receiver",
]


def pytest_configure(config: pytest.Config) -> None:
    # Prefect state for the whole test session lives in one temp dir (migrated once).
    home = Path(config.rootpath) / ".prefect" / "pytest"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(home)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    os.environ.pop("ABLEAUDIT_WAREHOUSE", None)


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "wh" / "ableaudit.duckdb"
    monkeypatch.setenv("ABLEAUDIT_WAREHOUSE", str(path))
    return path


@pytest.fixture(scope="module")
def torch_one_thread():
    """Torch on one thread for a module's training tests (two cores, shared with llama.cpp and dbt)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_unconfigure(config: pytest.Config) -> None:
    # Prefect stops its temporary server at interpreter exit and logs that to a console
    # stream pytest has already closed ("Logging error ... I/O operation on closed file").
    # Detach Prefect's handlers once the session is over; its results are in already.
    import logging

    for name in list(logging.root.manager.loggerDict):
        if name == "prefect" or name.startswith("prefect."):
            logger = logging.getLogger(name)
            logger.handlers.clear()
            logger.propagate = False
