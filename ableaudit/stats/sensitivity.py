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


COUNT_COLUMNS = ["direction", "degradation_rule", "n_pairs", "n_degraded", "n_improved"]
"""What ``threshold_sensitivity_from_counts`` reads per `keys` and threshold: the one direction
and rule of the group (null when none or several), and its counts of included, degraded and
improved pairs."""


def flag_counts(flags: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The flags counted per `keys` and threshold (``COUNT_COLUMNS``); the mart counts them in
    SQL instead (``count_sql``), so the flags never leave the warehouse."""
    keys = list(keys)
    require_columns(flags, keys + FLAG_COLUMNS, "threshold_sensitivity")
    rows = []
    for key, g in flags.groupby(keys + ["threshold"], sort=True, dropna=False):
        included = _flag(g["included"])
        rows.append(
            {
                **dict(zip(keys + ["threshold"], group_key_values(key))),
                "direction": _single(g["direction"]),
                "degradation_rule": _single(g["degradation_rule"]),
                "n_pairs": int(included.sum()),
                "n_degraded": int((_flag(g["degraded"]) & included).sum()),
                "n_improved": int((_flag(g["improved"]) & included).sum()),
            }
        )
    return pd.DataFrame(rows, columns=keys + ["threshold", *COUNT_COLUMNS])


def count_sql(keys: Sequence[str]) -> tuple[str, str]:
    """``flag_counts`` as the aggregate and group expressions of a DuckDB relation
    (``relation.aggregate(*count_sql(keys))``)."""
    group = ", ".join([*keys, "threshold"])

    def single(column: str) -> str:
        # one distinct value, nulls aside, is the least equal to the greatest: no set of
        # distinct values per group (half the time of the mart's read at a million pairs)
        return f"case when min({column}) = max({column}) then min({column}) end as {column}"

    included = "coalesce(included, false)"
    aggregate = ", ".join(
        [
            group,
            single("direction"),
            single("degradation_rule"),
            f"count(*) filter (where {included}) as n_pairs",
            f"count(*) filter (where {included} and coalesce(degraded, false)) as n_degraded",
            f"count(*) filter (where {included} and coalesce(improved, false)) as n_improved",
        ]
    )
    return aggregate, group


def threshold_sensitivity(
    flags: pd.DataFrame,
    keys: Sequence[str] = ("task", "model_id", "arm", "metric"),
) -> pd.DataFrame:
    """Degradation rate and sign test per `keys` and threshold, from the warehouse's flags."""
    return threshold_sensitivity_from_counts(flag_counts(flags, keys), keys)


def threshold_sensitivity_from_counts(
    counts: pd.DataFrame,
    keys: Sequence[str] = ("task", "model_id", "arm", "metric"),
) -> pd.DataFrame:
    """Degradation rate and sign test per `keys` and threshold, from the flags' counts
    (``flag_counts``, or the same counted in SQL with ``count_sql``), in key order."""
    keys = list(keys)
    require_columns(counts, keys + ["threshold", *COUNT_COLUMNS], "threshold_sensitivity")
    counts = counts.sort_values(keys + ["threshold"], na_position="last", kind="stable")
    rows = []
    for r in counts.itertuples(index=False):
        r = r._asdict()
        n, n_deg, n_imp = int(r["n_pairs"]), int(r["n_degraded"]), int(r["n_improved"])
        why = Reasons()
        p = float("nan")
        if n == 0:
            why.add("degradation_pct", "n=0 (no included pair)")
            why.add("sign_test", "n=0 (no included pair)")
        elif n_deg + n_imp == 0:
            why.add("sign_test", "no degraded or improved pairs")
        else:
            p = finite(stats.binomtest(n_deg, n_deg + n_imp, 0.5, alternative="greater").pvalue)
        direction = None if pd.isna(r["direction"]) else str(r["direction"])
        rule = None if pd.isna(r["degradation_rule"]) else str(r["degradation_rule"])
        if direction is None:
            why.add("direction", "unknown or conflicting")
        rows.append(
            {
                **{k: (None if pd.isna(r[k]) else r[k]) for k in keys},
                "direction": direction,
                "threshold": float(r["threshold"]),
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
