"""Mart `model_comparison`: do models differ in how much the disability context moves their scores?

Thin wiring over ableaudit.stats.model_comparison: a one-way ANOVA of the
per-pair differences (disability - neutral) across models, per task, arm,
query set and metric, over the included pairs of int_pair_scores. DuckDB
collects each model's differences into one array (``model_diffs_sql``), so a
few hundred rows reach Python, not every pair.
"""

import pandas as pd

from ableaudit.dbt.models import after_arm, read, to_arrow
from ableaudit.stats import MODEL_COMPARISON_SCHEMA
from ableaudit.stats.paired import MODEL_DIFF_KEYS, model_comparison_of_diffs, model_diffs_sql

SCHEMA = after_arm(MODEL_COMPARISON_SCHEMA)
# per query set as well: the statistics are never pooled across query sets
SQL = model_diffs_sql(["query_set"])


def model(dbt, session):
    dbt.config(materialized="table")
    pairs = dbt.ref("int_pair_scores").filter("included")
    diffs = read(pairs.query("pairs", SQL))
    parts = [
        model_comparison_of_diffs(group[[*MODEL_DIFF_KEYS, "diffs"]]).assign(query_set=query_set)
        for query_set, group in diffs.groupby("query_set", sort=True)
    ]
    return to_arrow(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(), SCHEMA)
