"""Which selector of selectors.yml a build runs, from what the last build that succeeded read."""

from __future__ import annotations

import pytest

from ableaudit.dbt import runner


@pytest.fixture
def dbt_args(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    monkeypatch.setattr(runner, "run_dbt", lambda args, warehouse=None: calls.append(args))
    return calls


@pytest.mark.parametrize(
    "all_tests, project_checked, changed, selector",
    [
        (False, False, None, None),  # dbt's default selector
        (False, True, None, runner.LANDED_ROWS_SELECTOR),  # no record of the raw tables
        (False, True, frozenset({"generations", "landings"}), runner.ANSWERS_LANDED_SELECTOR),
        (False, True, frozenset(), runner.ANSWERS_LANDED_SELECTOR),
        (False, True, frozenset({"generations", "judgments"}), runner.LANDED_ROWS_SELECTOR),
        (False, True, frozenset({"annotations"}), runner.LANDED_ROWS_SELECTOR),
        (True, True, frozenset({"generations"}), runner.ALL_TESTS_SELECTOR),
        (False, False, frozenset({"generations"}), None),  # another project: every node
    ],
)
def test_a_build_leaves_out_what_reads_none_of_the_raw_tables_that_changed(
    dbt_args, all_tests, project_checked, changed, selector
):
    runner.build(
        "wh.duckdb",
        all_tests=all_tests,
        project_checked=project_checked,
        changed_raw_tables=changed,
    )
    (args,) = dbt_args
    assert args[0] == "build"
    assert (args[args.index("--selector") + 1] if "--selector" in args else None) == selector
