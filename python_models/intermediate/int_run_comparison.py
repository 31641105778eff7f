"""Run-to-run comparison statistics (mart run_comparison reads them).

Thin wiring over ableaudit.gates.evaluation.run_comparisons and
ableaudit.stats.runs.compare_cohorts: the included pairs of int_run_pair_flags, each
run against the previous run of its target (and each model revision against the
previous revision), plus the baselines the gate rules of var('gates_file') name (a
pinned run, the last passing run per int_gate_checks). Whole queries (images) are
resampled var('bootstrap_samples') times, seeded by var('bootstrap_seed'); under
var('comparison_min_units') units a change is 'inconclusive'.
"""

from ableaudit.dbt.models import bootstrap_settings, meta, read, to_arrow
from ableaudit.gates.evaluation import (
    RUN_COMPARISON_SCHEMA,
    RUN_RATE_COLUMNS,
    baselines,
    run_comparisons,
    runs_of_targets,
)
from ableaudit.gates.rules import rules_for_build

FLAG_COLUMNS = [
    "cohort_kind",
    "cohort_id",
    "cohort_started_at",
    "pair_id",
    "task",
    "model_id",
    "arm",
    "query_set",
    "query_id",
    "domain",
    "disability_id",
    "model_revision",
    "metric",
    "included",
    "flagged",
]


def model(dbt, session):
    dbt.config(materialized="table")
    gates_file = dbt.config.meta_get("gates_file")
    min_units = dbt.config.meta_get("comparison_min_units")
    n_boot = dbt.config.meta_get(
        "bootstrap_samples"
    )  # each meta_get alone on its line: dbt parses these calls
    seed = dbt.config.meta_get("bootstrap_seed")
    n_boot, seed = bootstrap_settings(n_boot, seed)

    rules = rules_for_build(gates_file)
    flags = read(dbt.ref("int_run_pair_flags"), FLAG_COLUMNS, where="included")
    runs = runs_of_targets(
        read(dbt.ref("run_rates"), RUN_RATE_COLUMNS, where="cohort_kind = 'run'")
    )
    checks = read(dbt.ref("int_gate_checks"))
    out = run_comparisons(
        flags,
        baselines(rules, runs, checks),
        n_boot=n_boot,
        seed=seed,
        min_units=meta(min_units, 10, int),
    )
    return to_arrow(out, RUN_COMPARISON_SCHEMA)
