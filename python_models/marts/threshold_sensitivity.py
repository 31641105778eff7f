"""Mart `threshold_sensitivity`: how the degradation rate depends on the threshold of Eq. 1.

Thin wiring over ableaudit.stats.sensitivity: the per-pair flags of
int_pair_thresholds (every pair x metric x threshold of var('sensitivity_thresholds'),
degraded or improved by macro is_degraded under var('degradation_rule')) are
counted per task, model, arm, query set, metric and threshold, with a one-sided
sign test of degraded versus improved pairs. No rule is decided here. The counting
runs in DuckDB (``count_sql``), so only one row per group and threshold reaches Python.
"""

from ableaudit.dbt.models import read, to_arrow
from ableaudit.stats import THRESHOLD_SENSITIVITY_SCHEMA
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
}


def model(dbt, session):
    dbt.config(materialized="table")
    flags = dbt.ref("int_pair_thresholds").select(*FLAG_COLUMNS)
    counts = read(flags.aggregate(*count_sql(KEYS)))
    return to_arrow(threshold_sensitivity_from_counts(counts, keys=KEYS), SCHEMA)
