"""Degradation against model size (mart `scaling`).

Input `degradation`: overall degradation rates, columns task, model_id, arm, metric,
degradation_pct (if it has a `slice` column only slice = 'overall' is used; any
other key columns, e.g. threshold, can be added through `by`). Input `sizes`:
model_id, params_b (billions of parameters; from the config or a seed).

`scaling_points()`: one row per (task, arm, metric, model_id) with a known size:
params_b and degradation_pct (SCALING_POINTS_SCHEMA) - what a plot needs.

`scaling()`: one row per (task, arm, metric) (SCALING_SCHEMA): n_models (with a
size and a rate), n_models_without_size, spearman_rho and spearman_p of
degradation_pct vs params_b (ableaudit.stats.ranks.spearman_test: ties get average
ranks; p is exact, by permutation over all n! pairings, up to 10 models, and
scipy.stats.spearmanr's t approximation above), spearman_method saying which, and
a reason when NULL: fewer than 3 models, or constant sizes or rates. Three models
can never give p below 1/3 (two of the 3! orderings reach |rho| = 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ableaudit.stats._common import (
    Reasons,
    group_key_values,
    is_zero_sd,
    require_columns,
    typed_frame,
)
from ableaudit.stats.ranks import spearman_test

MIN_MODELS = 3

SCALING_SCHEMA: dict[str, str] = {
    "task": "str",
    "arm": "str",
    "metric": "str",
    "n_models": "int64",
    "n_models_without_size": "int64",
    "spearman_rho": "float64",
    "spearman_p": "float64",
    "spearman_method": "str",
    "reason": "str",
}

SCALING_POINTS_SCHEMA: dict[str, str] = {
    "task": "str",
    "arm": "str",
    "metric": "str",
    "model_id": "str",
    "params_b": "float64",
    "degradation_pct": "float64",
}


def _joined(degradation: pd.DataFrame, sizes: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    require_columns(degradation, list(by) + ["model_id", "degradation_pct"], "scaling: degradation")
    require_columns(sizes, ["model_id", "params_b"], "scaling: sizes")
    deg = degradation
    if "slice" in deg.columns:
        deg = deg[deg["slice"] == "overall"]
    sz = sizes[["model_id", "params_b"]].dropna().drop_duplicates("model_id", keep="last")
    df = deg.merge(sz, on="model_id", how="left")
    df["params_b"] = pd.to_numeric(df["params_b"], errors="coerce").astype(float)
    df["degradation_pct"] = pd.to_numeric(df["degradation_pct"], errors="coerce").astype(float)
    return df


def _schema(schema: dict[str, str], by: Sequence[str]) -> dict[str, str]:
    default = ["task", "arm", "metric"]
    if list(by) == default:
        return schema
    return {**{k: "str" for k in by}, **{k: v for k, v in schema.items() if k not in default}}


def scaling_points(
    degradation: pd.DataFrame, sizes: pd.DataFrame, by: Sequence[str] = ("task", "arm", "metric")
) -> pd.DataFrame:
    df = _joined(degradation, sizes, by)
    df = df[df["params_b"].notna() & df["degradation_pct"].notna()]
    df = df.sort_values(list(by) + ["params_b", "model_id"], kind="mergesort")
    return typed_frame(df, _schema(SCALING_POINTS_SCHEMA, by))


def scaling(
    degradation: pd.DataFrame, sizes: pd.DataFrame, by: Sequence[str] = ("task", "arm", "metric")
) -> pd.DataFrame:
    by = list(by)
    df = _joined(degradation, sizes, by)
    rows = []
    for key, g in df.groupby(by, sort=True, dropna=False):
        key = group_key_values(key)
        ok = g[g["params_b"].notna() & g["degradation_pct"].notna()]
        x, y = ok["params_b"].to_numpy(float), ok["degradation_pct"].to_numpy(float)
        why = Reasons()
        rho = p = float("nan")
        method = None
        if len(ok) < MIN_MODELS:
            why.add(
                "spearman", f"fewer than {MIN_MODELS} models with a size and a degradation rate"
            )
        elif is_zero_sd(x):
            why.add("spearman", "all models have the same size")
        elif is_zero_sd(y):
            why.add("spearman", "all models have the same degradation rate")
        else:
            rho, p, method, reason = spearman_test(x, y)
            if reason:
                why.add("spearman", reason)
        rows.append(
            {
                **dict(zip(by, key)),
                "n_models": int(len(ok)),
                "n_models_without_size": int(g.loc[g["params_b"].isna(), "model_id"].nunique()),
                "spearman_rho": rho,
                "spearman_p": p,
                "spearman_method": method,
                "reason": why.text,
            }
        )
    return typed_frame(rows, _schema(SCALING_SCHEMA, by))
