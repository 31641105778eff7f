"""Mart `scaling`: does degradation grow or shrink with model size?

Thin wiring over ableaudit.stats.scaling: the overall degradation rate of each
model (mart `degradation`, slice 'overall', at var('degradation_threshold'))
against its size (int_model_sizes: the seed model_sizes, else the audit
config's params_b), per task, arm, query set and metric, with a Spearman trend
(exact p up to 10 models; spearman_method says which). threshold and
degradation_rule say how the rates were made.
models_json lists the points (model_id, params_b, degradation_pct) by size.
"""

import json

from ableaudit.dbt.models import read, to_arrow
from ableaudit.stats import SCALING_SCHEMA, scaling, scaling_points

BY = ["task", "arm", "query_set", "metric"]
REST = [c for c in SCALING_SCHEMA if c not in ("task", "arm", "metric")]
SCHEMA = {
    **{k: "str" for k in BY},
    "threshold": "float64",
    "degradation_rule": "str",
    **{c: SCALING_SCHEMA[c] for c in REST if c != "reason"},
    "models_json": "str",
    "reason": "str",
}


def model(dbt, session):
    dbt.config(materialized="table")
    rates = read(
        dbt.ref("degradation"),
        [*BY, "model_id", "degradation_pct", "threshold", "degradation_rule"],
        where="slice = 'overall'",
    )
    sizes = read(dbt.ref("int_model_sizes"), ["model_id", "params_b"])

    out = scaling(rates, sizes, by=BY)
    points = scaling_points(rates, sizes, by=BY)
    listed = {
        key: json.dumps(
            [
                {
                    "model_id": r.model_id,
                    "params_b": r.params_b,
                    "degradation_pct": r.degradation_pct,
                }
                for r in g.itertuples()
            ]
        )
        for key, g in points.groupby(BY, sort=False)
    }
    out["models_json"] = [listed.get(tuple(k), "[]") for k in out[BY].itertuples(index=False)]
    for column in ("threshold", "degradation_rule"):
        per_group = rates.groupby(BY)[column].max()
        out[column] = (
            [per_group.get(tuple(k)) for k in out[BY].itertuples(index=False)] if len(out) else []
        )
    return to_arrow(out, SCHEMA)
