"""Mart `model_comparison`: do models differ in how much the disability context moves their scores?

Thin wiring over ableaudit.stats.model_comparison: a one-way ANOVA of the
per-pair differences (disability - neutral) across models, per task, arm,
query set and metric, over the included pairs of int_pair_scores.
"""

import pandas as pd

from ableaudit.dbt.models import after_arm, read, to_arrow
from ableaudit.stats import MODEL_COMPARISON_SCHEMA, model_comparison

PAIR_COLUMNS = [
    "task",
    "model_id",
    "arm",
    "query_set",
    "metric",
    "neutral_score",
    "disability_score",
]
SCHEMA = after_arm(MODEL_COMPARISON_SCHEMA)


def model(dbt, session):
    dbt.config(materialized="table")
    pairs = read(dbt.ref("int_pair_scores"), PAIR_COLUMNS, where="included")
    parts = [
        model_comparison(group).assign(query_set=query_set)
        for query_set, group in pairs.groupby("query_set", sort=True)
    ]
    return to_arrow(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(), SCHEMA)
