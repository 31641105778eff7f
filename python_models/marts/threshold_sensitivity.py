"""Mart `threshold_sensitivity`: how the degradation rate depends on the threshold of Eq. 1.

Thin wiring over ableaudit.stats.threshold_sensitivity: per task, model, arm,
query set and metric, and each threshold of var('sensitivity_thresholds'),
the degradation rate of the included pairs of int_pair_scores and a one-sided
sign test of degraded versus improved pairs.
"""

import json

import pyarrow as pa
import yaml

from ableaudit.warehouse.ibis_compat import from_connection
from ableaudit.stats import DEFAULT_THRESHOLDS, THRESHOLD_SENSITIVITY_SCHEMA, threshold_sensitivity

ARROW = {"str": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
KEYS = ("task", "model_id", "arm", "query_set", "metric")
PAIR_COLUMNS = [*KEYS, "direction", "neutral_score", "disability_score"]
SCHEMA = {**{k: "str" for k in KEYS},
          **{c: t for c, t in THRESHOLD_SENSITIVITY_SCHEMA.items() if c not in KEYS}}


def thresholds(value) -> list[float]:
    """The var as rendered into meta: a list, or its text ('[0, 0.01, 0.05]')."""
    if value in (None, ""):
        return list(DEFAULT_THRESHOLDS)
    parsed = yaml.safe_load(value) if isinstance(value, str) else value
    if isinstance(parsed, (int, float)):
        parsed = [parsed]
    try:
        out = [float(t) for t in parsed]
    except (TypeError, ValueError):
        raise ValueError(
            f"var sensitivity_thresholds must be a list of numbers such as [0, 0.01, 0.05, 0.10, 0.20]; got {value!r}"
        ) from None
    if not out or any(t < 0 for t in out):
        raise ValueError(f"var sensitivity_thresholds must list thresholds >= 0; got {json.dumps(out)}")
    return sorted(set(out))


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("int_pair_scores")  # declares the dependency for dbt's DAG
    levels = thresholds(dbt.config.meta_get("sensitivity_thresholds"))

    con = from_connection(getattr(session, "_cursor", session))
    scores = con.table("int_pair_scores", database=(dbt.this.database, dbt.this.schema))
    pairs = scores.filter(scores.included).select(*PAIR_COLUMNS).to_pyarrow().to_pandas()

    out = threshold_sensitivity(pairs, thresholds=levels, keys=KEYS)
    schema = pa.schema([(c, ARROW[t]) for c, t in SCHEMA.items()])
    return pa.Table.from_pandas(out[list(SCHEMA)], schema=schema, preserve_index=False)
