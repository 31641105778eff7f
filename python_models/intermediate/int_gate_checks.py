"""The verdicts of the gate rules that hold one run to a threshold (every kind but
no_regression), per run of each target: rules from var('gates_file') (docs/gates.md).

Thin wiring over ableaudit.gates.evaluation.threshold_checks: per-run rates from
run_rates, the run's own judged pairs from int_run_pair_flags (judge_drop tests them
with ableaudit.stats.significance). interpretive_shift_max reads the contrastive measures
of run_rates, so each run is held to the verdicts on its own answers.
"""

from ableaudit.dbt.models import bootstrap_settings, read, to_arrow
from ableaudit.gates.evaluation import GATE_CHECK_SCHEMA, threshold_checks
from ableaudit.gates.rules import rules_for_build

FLAG_COLUMNS = [
    "cohort_kind",
    "cohort_id",
    "task",
    "model_id",
    "arm",
    "query_set",
    "query_id",
    "domain",
    "disability_id",
    "metric",
    "direction",
    "neutral_score",
    "disability_score",
    "included",
]


def model(dbt, session):
    dbt.config(materialized="table")
    gates_file = dbt.config.meta_get("gates_file")
    n_boot = dbt.config.meta_get(
        "bootstrap_samples"
    )  # each meta_get alone on its line: dbt parses these calls
    seed = dbt.config.meta_get("bootstrap_seed")
    n_boot, seed = bootstrap_settings(n_boot, seed)

    rules = rules_for_build(gates_file)
    run_rates = read(dbt.ref("run_rates"))
    pair_flags = read(
        dbt.ref("int_run_pair_flags"),
        FLAG_COLUMNS,
        where="cohort_kind = 'run' and included and metric like 'judge_score:%'",
    )
    checks = threshold_checks(rules, run_rates, pair_flags, n_boot=n_boot, seed=seed)
    return to_arrow(checks, GATE_CHECK_SCHEMA)
