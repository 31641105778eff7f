"""A failing dbt node is reported by what its message says went wrong (no dbt run here: the
messages are DuckDB's own errors, wrapped as dbt wraps them)."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import duckdb
import pytest

from ableaudit.dbt.runner import _failures, failure_detail


def _duckdb_error(sql: str) -> str:
    with pytest.raises(duckdb.Error) as raised, duckdb.connect() as con:
        con.execute(sql)
    return str(raised.value)


def _as_dbt_says(error: str, model: str = "int_x") -> str:
    return f"Runtime Error in model {model} (models/{model}.sql)\n" + textwrap.indent(error, "  ")


@pytest.mark.parametrize(
    "sql",
    [
        "select 1 as a\nfrom range(3)\nwhere nope > 1",  # Binder Error, with candidates
        "select *\nfrom no_such_table",  # Catalog Error
        "select cast('x' as integer)",  # Conversion Error
    ],
)
def test_a_duckdb_error_is_reported_by_its_message_not_its_caret_line(sql):
    error = _duckdb_error(sql)
    assert error.rstrip().splitlines()[-1].strip().startswith("^") or "LINE" not in error
    detail = failure_detail(_as_dbt_says(error))
    first = error.splitlines()[0]
    assert detail.startswith(first), detail
    assert "^" not in detail and "LINE" not in detail


def test_the_lines_after_the_error_up_to_the_sql_say_more():
    error = _duckdb_error("select 1 as a\nfrom range(3)\nwhere nope > 1")
    detail = failure_detail(_as_dbt_says(error))
    assert detail == 'Binder Error: Referenced column "nope" not found in FROM clause! ' + (
        'Candidate bindings: "range"'
    )


def test_other_messages_are_reported_by_their_last_line():
    assert failure_detail("Got 3 results, configured to fail if != 0") == (
        "Got 3 results, configured to fail if != 0"
    )
    python_model = (
        "Runtime Error in model significance\n  Python model failed:\n  ValueError: n < 2"
    )
    assert failure_detail(python_model) == "ValueError: n < 2"
    assert failure_detail("") == ""


def test_a_macros_compilation_error_is_reported_by_its_message_not_the_macro_trace():
    raised = (
        "Compilation Error in model stg_registry__pair_scorers (models/staging/x.sql)\n"
        "  var pair_metric_thresholds names 'cosine', which is no pair metric\n"
        "  \n"
        "  > in macro registered_pair_scorers (macros/registered_pair_scorers.sql)\n"
        "  > called by model stg_registry__pair_scorers (models/staging/x.sql)"
    )
    assert failure_detail(raised) == (
        "var pair_metric_thresholds names 'cosine', which is no pair metric"
    )


def test_a_failing_node_is_listed_with_its_message():
    error = _duckdb_error("select *\nfrom no_such_table")
    result = SimpleNamespace(
        results=[
            SimpleNamespace(
                status="error",
                node=SimpleNamespace(unique_id="model.ableaudit.int_x"),
                message=_as_dbt_says(error),
                failures=None,
            )
        ]
    )
    (line,) = _failures(result)
    assert (
        line
        == f"  - model.ableaudit.int_x [error]: {error.splitlines()[0]} " + (error.splitlines()[1])
    )
