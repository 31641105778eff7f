"""Mart `significance`: is the disability-aware score different from the neutral one?

Thin wiring over ableaudit.stats.significance (see its docstring for every
column): included pairs of int_pair_scores (direction from the metrics seed,
carried there), per task, model, arm, query set, metric and slice (overall,
domain, disability). The bootstrap resamples whole queries (`query_id`: for
vision pairs, the image's query), var('bootstrap_samples') times, seeded by
var('bootstrap_seed'). Query sets are never pooled, as in `degradation`.
"""

import pandas as pd
import pyarrow as pa

from ableaudit.warehouse.ibis_compat import from_connection
from ableaudit.stats import SIGNIFICANCE_SCHEMA, significance

ARROW = {"str": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
PAIR_COLUMNS = ["task", "model_id", "arm", "query_set", "metric", "direction", "domain", "disability_id",
                "query_id", "neutral_score", "disability_score"]
# query_set after arm: the mart's key reads task, model, arm, query set, metric, slice
SCHEMA = {}
for _col, _dtype in SIGNIFICANCE_SCHEMA.items():
    SCHEMA[_col] = _dtype
    if _col == "arm":
        SCHEMA["query_set"] = "str"


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("int_pair_scores")  # declares the dependency for dbt's DAG
    # (each meta_get on a line of its own: dbt finds the keys by parsing the code,
    # and does not see a call inside an `or`)
    n_boot = dbt.config.meta_get("bootstrap_samples")
    seed = dbt.config.meta_get("bootstrap_seed")
    n_boot, seed = int(2000 if n_boot in (None, "") else n_boot), int(0 if seed in (None, "") else seed)

    con = from_connection(getattr(session, "_cursor", session))
    scores = con.table("int_pair_scores", database=(dbt.this.database, dbt.this.schema))
    pairs = scores.filter(scores.included).select(*PAIR_COLUMNS).to_pyarrow().to_pandas()

    parts = [
        significance(group, cluster_col="query_id", n_boot=n_boot, seed=seed).assign(query_set=query_set)
        for query_set, group in pairs.groupby("query_set", sort=True)
    ]
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(SCHEMA))
    schema = pa.schema([(c, ARROW[t]) for c, t in SCHEMA.items()])
    return pa.Table.from_pandas(out[list(SCHEMA)], schema=schema, preserve_index=False)
