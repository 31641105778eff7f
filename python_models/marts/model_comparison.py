"""Mart `model_comparison`: do models differ in how much the disability context moves their scores?

Thin wiring over ableaudit.stats.model_comparison: a one-way ANOVA of the
per-pair differences (disability - neutral) across models, per task, arm,
query set and metric, over the included pairs of int_pair_scores.
"""

import pandas as pd
import pyarrow as pa

from ableaudit.warehouse.ibis_compat import from_connection
from ableaudit.stats import MODEL_COMPARISON_SCHEMA, model_comparison

ARROW = {"str": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
PAIR_COLUMNS = ["task", "model_id", "arm", "query_set", "metric", "neutral_score", "disability_score"]
SCHEMA = {}
for _col, _dtype in MODEL_COMPARISON_SCHEMA.items():
    SCHEMA[_col] = _dtype
    if _col == "arm":
        SCHEMA["query_set"] = "str"


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("int_pair_scores")  # declares the dependency for dbt's DAG

    con = from_connection(getattr(session, "_cursor", session))
    scores = con.table("int_pair_scores", database=(dbt.this.database, dbt.this.schema))
    pairs = scores.filter(scores.included).select(*PAIR_COLUMNS).to_pyarrow().to_pandas()

    parts = [
        model_comparison(group).assign(query_set=query_set)
        for query_set, group in pairs.groupby("query_set", sort=True)
    ]
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(SCHEMA))
    schema = pa.schema([(c, ARROW[t]) for c, t in SCHEMA.items()])
    return pa.Table.from_pandas(out[list(SCHEMA)], schema=schema, preserve_index=False)
