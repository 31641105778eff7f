"""The terminal's verbosity: quiet by default (Prefect's and dbt's warnings and errors), every
line with -v; dbt's file log keeps its debug lines either way; nothing outlives the command."""

from __future__ import annotations

import logging
import os

import pytest

from ableaudit.audit import prefect_env
from ableaudit.cli.main import build_parser

KEYS = (prefect_env.CONSOLE_LEVEL, prefect_env.DBT_LOG_LEVEL, prefect_env.DBT_LOG_LEVEL_FILE)


@pytest.mark.parametrize(
    ("verbose", "console", "dbt", "level"),
    [(False, "WARNING", "warn", logging.WARNING), (True, "NOTSET", "info", logging.NOTSET)],
)
def test_terminal_sets_then_restores_both_logs(monkeypatch, verbose, console, dbt, level):
    import prefect.main  # noqa: F401 - Prefect configures its logging on import
    from prefect.logging.handlers import PrefectConsoleHandler

    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    handlers = prefect_env._console_handlers()
    assert handlers and all(isinstance(h, PrefectConsoleHandler) for h in handlers)
    before = [h.level for h in handlers]
    with prefect_env.terminal(verbose):
        assert os.environ[prefect_env.CONSOLE_LEVEL] == console
        assert os.environ[prefect_env.DBT_LOG_LEVEL] == dbt
        assert os.environ[prefect_env.DBT_LOG_LEVEL_FILE] == "debug"
        assert {h.level for h in handlers} == {level}
    assert [h.level for h in handlers] == before
    assert not [k for k in KEYS if k in os.environ]


@pytest.mark.parametrize("argv", [["-v", "history"], ["history", "-v"], ["history", "--verbose"]])
def test_verbose_before_or_after_the_command(argv):
    assert build_parser().parse_args(argv).verbose is True
    assert build_parser().parse_args(["history"]).verbose is False
