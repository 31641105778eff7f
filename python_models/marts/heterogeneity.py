"""Mart `heterogeneity`: do the degradation rates differ across disability categories, or across
domains?

Thin wiring over ableaudit.stats.heterogeneity (see its docstring for every column): the
included pairs of int_pair_scores with their degraded flag (macro is_degraded), per task,
model, arm, query set and metric; Cochran's Q across categories (a neutral answer is a
block), a one-way ANOVA of per-query rates across domains, the worst and best level and the
gap's interval resampling whole queries, var('bootstrap_samples') times, seeded by
var('bootstrap_seed'). Query sets are never pooled.
"""

import pandas as pd

from ableaudit.dbt.models import after_arm, bootstrap_settings, read, to_arrow
from ableaudit.stats import HETEROGENEITY_SCHEMA, heterogeneity

SCHEMA = after_arm(HETEROGENEITY_SCHEMA)
COLUMNS = [
    "task",
    "model_id",
    "arm",
    "query_set",
    "metric",
    "domain",
    "disability_id",
    "query_id",
    "neutral_generation_id",
    "degraded",
]


def model(dbt, session):
    dbt.config(materialized="table")
    n_boot = dbt.config.meta_get(
        "bootstrap_samples"
    )  # each meta_get alone on its line: dbt parses these calls
    seed = dbt.config.meta_get("bootstrap_seed")
    n_boot, seed = bootstrap_settings(n_boot, seed)
    pairs = read(dbt.ref("int_pair_scores"), COLUMNS, "included and degraded is not null")
    parts = [
        heterogeneity(group, n_boot=n_boot, seed=seed).assign(query_set=query_set)
        for query_set, group in pairs.groupby("query_set", sort=True)
    ]
    return to_arrow(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(), SCHEMA)
