"""Mart `significance`: is the disability-aware score different from the neutral one?

Thin wiring over ableaudit.stats.significance (see its docstring for every
column): included pairs of int_pair_scores (direction from the metrics seed,
carried there), per task, model, arm, query set, metric and slice (overall,
domain, disability). The bootstrap resamples whole queries (`query_id`: for
vision pairs, the image's query), var('bootstrap_samples') times, seeded by
var('bootstrap_seed'). Query sets are never pooled, as in `degradation`.
"""

import pandas as pd

from ableaudit.dbt.models import after_arm, bootstrap_settings, read, to_arrow
from ableaudit.stats import SIGNIFICANCE_SCHEMA, significance

PAIR_COLUMNS = [
    "task",
    "model_id",
    "arm",
    "query_set",
    "metric",
    "direction",
    "domain",
    "disability_id",
    "query_id",
    "neutral_score",
    "disability_score",
]
SCHEMA = after_arm(SIGNIFICANCE_SCHEMA)


def model(dbt, session):
    dbt.config(materialized="table")
    n_boot = dbt.config.meta_get(
        "bootstrap_samples"
    )  # each meta_get alone on its line: dbt parses these calls
    seed = dbt.config.meta_get("bootstrap_seed")
    n_boot, seed = bootstrap_settings(n_boot, seed)

    pairs = read(dbt.ref("int_pair_scores"), PAIR_COLUMNS, where="included")
    parts = [
        significance(group, cluster_col="query_id", n_boot=n_boot, seed=seed).assign(
            query_set=query_set
        )
        for query_set, group in pairs.groupby("query_set", sort=True)
    ]
    return to_arrow(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(), SCHEMA)
