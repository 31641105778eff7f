"""Threshold sensitivity of the degradation rate (mart `threshold_sensitivity`).

The degradation rule itself lives in SQL, once (macros/is_degraded.sql): the
intermediate model int_pair_thresholds crosses every pair with every threshold
of var('sensitivity_thresholds') and flags it degraded or improved there. This
module only counts those flags and tests them; it never decides whether a pair
is degraded.

Input `flags`: one row per pair (x metric) and threshold, with the `keys`,
direction, threshold, degradation_rule, included, degraded and improved
(degraded and improved are null where the pair is not included).

`threshold_sensitivity()` returns, per `keys` and threshold, the columns of
THRESHOLD_SENSITIVITY_SCHEMA:

    degradation_rule   the rule that produced the flags ('strict_relative', 'paper_literal')
    n_pairs            included pairs
    n_degraded         pairs degraded at that threshold
    n_improved         pairs improved by the mirror rule
    n_unchanged        the rest: ties and changes smaller than the margin
    degradation_pct    100 * n_degraded / n_pairs (the paper's Delta_M at that threshold)
    improvement_pct    100 * n_improved / n_pairs
    sign_test_p        one-sided exact sign test that degradation is more likely than
                       improvement: scipy.stats.binomtest(n_degraded, n_degraded +
                       n_improved, 0.5, alternative='greater'); unchanged pairs do not count
    sign_test_method   'exact_binomial' where there is a p
    reason             why a value is NULL ('degradation_pct: n=0', ...)

A group whose pairs are all excluded (a scorer that was unavailable) keeps one
row per threshold with n_pairs 0, NULL rates and a reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ableaudit.stats._common import Reasons, finite, group_key_values, require_columns, typed_frame

DEFAULT_THRESHOLDS = (0.0, 0.01, 0.05, 0.10, 0.20)  # VLM paper D.1, AccessEval B.3
SIGN_TEST_METHOD = "exact_binomial"

THRESHOLD_SENSITIVITY_SCHEMA: dict[str, str] = {
    "task": "str",
    "model_id": "str",
    "arm": "str",
    "metric": "str",
    "direction": "str",
    "threshold": "float64",
    "degradation_rule": "str",
    "n_pairs": "int64",
    "n_degraded": "int64",
    "n_improved": "int64",
    "n_unchanged": "int64",
    "degradation_pct": "float64",
    "improvement_pct": "float64",
    "sign_test_p": "float64",
    "sign_test_method": "str",
    "reason": "str",
}

FLAG_COLUMNS = ["direction", "threshold", "degradation_rule", "included", "degraded", "improved"]


def _flag(values: pd.Series) -> np.ndarray:
    """A nullable boolean column as a plain bool array (null -> False)."""
    return values.astype("boolean").fillna(False).to_numpy(dtype=bool)


def _single(values: pd.Series) -> str | None:
    found = values.dropna().unique()
    return str(found[0]) if len(found) == 1 else None


def threshold_sensitivity(
    flags: pd.DataFrame,
    keys: Sequence[str] = ("task", "model_id", "arm", "metric"),
) -> pd.DataFrame:
    """Degradation rate and sign test per `keys` and threshold, from the warehouse's flags."""
    keys = list(keys)
    require_columns(flags, keys + FLAG_COLUMNS, "threshold_sensitivity")
    rows = []
    for key, g in flags.groupby(keys + ["threshold"], sort=True, dropna=False):
        key = group_key_values(key)
        included = _flag(g["included"])
        n = int(included.sum())
        n_deg = int((_flag(g["degraded"]) & included).sum())
        n_imp = int((_flag(g["improved"]) & included).sum())
        why = Reasons()
        p = float("nan")
        if n == 0:
            why.add("degradation_pct", "n=0 (no included pair)")
            why.add("sign_test", "n=0 (no included pair)")
        elif n_deg + n_imp == 0:
            why.add("sign_test", "no degraded or improved pairs")
        else:
            p = finite(stats.binomtest(n_deg, n_deg + n_imp, 0.5, alternative="greater").pvalue)
        direction, rule = _single(g["direction"]), _single(g["degradation_rule"])
        if direction is None:
            why.add("direction", "unknown or conflicting")
        rows.append(
            {
                **dict(zip(keys, key[:-1])),
                "direction": direction,
                "threshold": float(key[-1]),
                "degradation_rule": rule,
                "n_pairs": n,
                "n_degraded": n_deg,
                "n_improved": n_imp,
                "n_unchanged": n - n_deg - n_imp,
                "degradation_pct": 100.0 * n_deg / n if n else float("nan"),
                "improvement_pct": 100.0 * n_imp / n if n else float("nan"),
                "sign_test_p": p,
                "sign_test_method": SIGN_TEST_METHOD if not np.isnan(p) else None,
                "reason": why.text,
            }
        )
    schema = dict(THRESHOLD_SENSITIVITY_SCHEMA)
    if keys != ["task", "model_id", "arm", "metric"]:
        schema = {
            **{k: "str" for k in keys},
            **{k: v for k, v in schema.items() if k not in ("task", "model_id", "arm", "metric")},
        }
    return typed_frame(rows, schema)
