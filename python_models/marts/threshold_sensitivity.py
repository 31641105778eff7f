"""Mart `threshold_sensitivity`: how the degradation rate depends on the threshold of Eq. 1.

Thin wiring over ableaudit.stats.threshold_sensitivity: the per-pair flags of
int_pair_thresholds (every pair x metric x threshold of var('sensitivity_thresholds'),
degraded or improved by macro is_degraded under var('degradation_rule')) are
counted per task, model, arm, query set, metric and threshold, with a one-sided
sign test of degraded versus improved pairs. No rule is decided here.
"""

import pyarrow as pa

from ableaudit.warehouse.ibis_compat import from_connection
from ableaudit.stats import THRESHOLD_SENSITIVITY_SCHEMA, threshold_sensitivity

ARROW = {"str": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
KEYS = ("task", "model_id", "arm", "query_set", "metric")
FLAG_COLUMNS = [*KEYS, "direction", "threshold", "degradation_rule", "included", "degraded", "improved"]
SCHEMA = {**{k: "str" for k in KEYS},
          **{c: t for c, t in THRESHOLD_SENSITIVITY_SCHEMA.items() if c not in KEYS}}


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("int_pair_thresholds")  # declares the dependency for dbt's DAG

    con = from_connection(getattr(session, "_cursor", session))
    flags = (con.table("int_pair_thresholds", database=(dbt.this.database, dbt.this.schema))
             .select(*FLAG_COLUMNS).to_pyarrow().to_pandas())

    out = threshold_sensitivity(flags, keys=KEYS)
    schema = pa.schema([(c, ARROW[t]) for c, t in SCHEMA.items()])
    return pa.Table.from_pandas(out[list(SCHEMA)], schema=schema, preserve_index=False)
