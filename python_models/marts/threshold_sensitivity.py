"""Mart `threshold_sensitivity`: how the degradation rate depends on the threshold of Eq. 1.

Thin wiring over ableaudit.stats.sensitivity: the per-pair flags of
int_pair_thresholds (every pair x metric x threshold of var('sensitivity_thresholds'),
degraded or improved by macro is_degraded under var('degradation_rule')) are
counted per task, model, arm, query set, metric and threshold, with a one-sided
sign test of degraded versus improved pairs. No rule is decided here. The counting
runs in DuckDB (``count_sql``), so only one row per group and threshold reaches Python.

Only the models whose rows of int_pair_scores changed are counted again: the others keep
their rows of the previous build (ableaudit.stats.reuse.reuse_by_model, column
inputs_fingerprint: the fingerprint int_pair_scores records of each model's rows, with the
definition of int_pair_thresholds, where the thresholds and the rule are written out, and the
code: this model's source as dbt compiled it, with its config, vars and reuse key, and every
module it imports). `--vars '{stats_reuse: false}'` counts every model.
"""

from ableaudit.dbt.models import meta, read, reuse_flag, to_arrow, view_definition
from ableaudit.stats import THRESHOLD_SENSITIVITY_SCHEMA
from ableaudit.stats.reuse import (
    FINGERPRINT,
    code_digest,
    previous_rows,
    recorded_fingerprints,
    reuse_by_model,
)
from ableaudit.stats.sensitivity import count_sql, threshold_sensitivity_from_counts

KEYS = ("task", "model_id", "arm", "query_set", "metric")
FLAG_COLUMNS = [
    *KEYS,
    "direction",
    "threshold",
    "degradation_rule",
    "included",
    "degraded",
    "improved",
]
SCHEMA = {
    **{k: "str" for k in KEYS},
    **{c: t for c, t in THRESHOLD_SENSITIVITY_SCHEMA.items() if c not in KEYS},
    FINGERPRINT: "str",
}


def model(dbt, session):
    dbt.config(materialized="table")
    reuse = dbt.config.meta_get("stats_reuse")
    thresholds = dbt.ref("int_pair_thresholds")
    dbt.ref("int_pair_scores")  # the fingerprints of its rows say which models changed
    flags = thresholds.select(*FLAG_COLUMNS)

    def compute(models):
        scoped = flags if models is None else flags.filter(_model_in(models))
        counts = read(scoped.aggregate(*count_sql(KEYS)))
        return threshold_sensitivity_from_counts(counts, keys=KEYS)

    settings = {
        "flags": view_definition(session, dbt.this.schema, "int_pair_thresholds"),
        "code": code_digest(__file__),
    }
    current = recorded_fingerprints(session, f"{dbt.this.schema}.int_pair_scores", settings)
    reusing = current is not None and meta(reuse, True, reuse_flag)
    previous = previous_rows(session, dbt.this, SCHEMA) if reusing else None
    rows, _, _ = reuse_by_model(previous, current, compute, list(SCHEMA))
    return to_arrow(rows.sort_values([*KEYS, "threshold"], kind="mergesort"), SCHEMA)


def _model_in(models):
    quoted = ", ".join("'" + m.replace("'", "''") + "'" for m in models)
    return f"model_id in ({quoted})"
