"""Shared fixtures: a temporary warehouse, and Prefect and dbt kept inside the test run.

`make test` runs the suite on two pytest-xdist workers. Each worker has its own Prefect home
and its own dbt target and log folders. The tests of one file run on one worker, so a module's
fixtures are built once, and so do the files of one entry of SHARED_SESSION_FIXTURES.

A dbt build runs its 800 data tests and unit tests in about 30 of its 38 seconds on an empty
warehouse. The suite runs them in the modules marked ``dbt_data_tests`` (those that test the
build and its failures), in the release gate's test and in the report worlds; elsewhere a build
only makes the tables a test reads (``DBT_EXCLUDE_RESOURCE_TYPES``). With
``ABLEAUDIT_TEST_DBT_TESTS=all`` every build of the suite runs them.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
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
    "tests.fixtures.viewer_world",
    "tests.fixtures.webhook_receiver",
    "tests.fixtures.queryset_generator",
]


DBT_FOLDER = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    # rouge-score logs through absl, whose handler keeps the sys.stderr of its import and closes
    # it when logging is configured again (importing Prefect does) unless it is sys.stderr then:
    # under pytest that stream is a capture file pytest goes on using. It writes to the
    # process's own stderr instead, which it never closes.
    import absl.logging

    absl.logging.get_absl_handler().python_handler.setStream(sys.__stderr__)
    # Prefect state for the whole test session lives in one folder per worker (migrated once).
    home = Path(config.rootpath) / ".prefect" / f"pytest-{worker}"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(home)
    # dbt writes its target/ and logs/ outside the checkout, one folder per worker, so that
    # workers never share a partial parse and every module after the first reuses its worker's.
    dbt = Path(tempfile.mkdtemp(prefix=f"ableaudit-dbt-{worker}-"))
    os.environ["DBT_TARGET_PATH"] = str(dbt / "target")
    os.environ["DBT_LOG_PATH"] = str(dbt / "logs")
    config.stash[DBT_FOLDER] = dbt
    if os.environ.get("ABLEAUDIT_TEST_DBT_TESTS") == "all":
        os.environ.pop("DBT_EXCLUDE_RESOURCE_TYPES", None)
    else:
        os.environ["DBT_EXCLUDE_RESOURCE_TYPES"] = "test unit_test"
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    os.environ.pop("ABLEAUDIT_WAREHOUSE", None)


# Files whose expensive session fixtures (built once per worker) are worth one worker.
SHARED_SESSION_FIXTURES = {
    "tests/functional/test_report.py": "report worlds",
    "tests/functional/test_report_browser.py": "report worlds",
    "tests/functional/test_viewer.py": "viewer world",
    "tests/functional/test_viewer_browser.py": "viewer world",
}


# The files that take longest (PYTEST_ADDOPTS=--durations=50 make test), handed out first so
# that no worker starts one of them while the other is nearly done.
LONGEST_FIRST = (
    "tests/functional/test_report.py",
    "tests/functional/test_report_browser.py",
    "tests/functional/test_build_skip.py",
    "tests/functional/test_pair_metrics.py",
    "tests/functional/test_reuse_key.py",
    "tests/functional/test_viewer.py",
    "tests/functional/test_viewer_browser.py",
    "tests/functional/test_audit_flow.py",
    "tests/functional/test_warehouse_build.py",
    "tests/functional/test_run_comparison.py",
    "tests/functional/test_differential_build.py",
    "tests/functional/test_reaudit_alerts.py",
    "tests/functional/test_vision_audit.py",
    "tests/functional/test_judge_dimensions.py",
    "tests/functional/test_canary_keys.py",
    "tests/functional/test_stats_marts.py",
)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_file(item.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Hand out whole files (or groups of files) to the workers, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # xdist would start with the files of most tests

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = _file(nodeid)
            return SHARED_SESSION_FIXTURES.get(path, path)

    return ByFile(config, log)


@pytest.fixture(scope="module", autouse=True)
def _dbt_data_tests(request: pytest.FixtureRequest):
    """dbt's data and unit tests on in a module marked ``dbt_data_tests``."""
    if request.node.get_closest_marker("dbt_data_tests") is None:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DBT_EXCLUDE_RESOURCE_TYPES", raising=False)
        yield


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
    dbt = config.stash.get(DBT_FOLDER, None)
    if dbt is not None:
        shutil.rmtree(dbt, ignore_errors=True)
    # Prefect stops its temporary server at interpreter exit and logs that to a console
    # stream pytest has already closed ("Logging error ... I/O operation on closed file").
    # Detach Prefect's handlers once the session is over; its results are in already.
    import logging

    for name in list(logging.root.manager.loggerDict):
        if name == "prefect" or name.startswith("prefect."):
            logger = logging.getLogger(name)
            logger.handlers.clear()
            logger.propagate = False
