"""The verdicts of the no_regression gate rules of var('gates_file'), per run of each
target, read from mart run_comparison (ableaudit.gates.evaluation.regression_checks)."""

from ableaudit.dbt.models import read, to_arrow
from ableaudit.gates.evaluation import (
    GATE_CHECK_SCHEMA,
    RUN_RATE_COLUMNS,
    regression_checks,
    runs_of_targets,
)
from ableaudit.gates.rules import rules_for_build


def model(dbt, session):
    dbt.config(materialized="table")
    gates_file = dbt.config.meta_get("gates_file")

    rules = rules_for_build(gates_file)
    comparison = read(dbt.ref("run_comparison"), where="compared_by = 'run'")
    runs = runs_of_targets(
        read(dbt.ref("run_rates"), RUN_RATE_COLUMNS, where="cohort_kind = 'run'")
    )
    checks = read(dbt.ref("int_gate_checks"))
    return to_arrow(regression_checks(rules, comparison, runs, checks), GATE_CHECK_SCHEMA)
