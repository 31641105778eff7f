"""The degradation rule (paper Eq. 1) and its threshold sensitivity (mart `threshold_sensitivity`).

`is_degraded` is the Python twin of macros/is_degraded.sql and must stay identical
to it: a disability-aware score is degraded when it is strictly worse than the
neutral one AND the gap is at least threshold x |neutral|:

    higher_is_better: disability < neutral and neutral - disability >= threshold*|neutral| - 1e-9
    lower_is_better:  disability > neutral and disability - neutral >= threshold*|neutral| - 1e-9

A tie is never degraded (not even at threshold 0); abs() keeps the rule meaningful
for negative neutral scores (VADER, Regard); the 1e-9 slack makes a gap exactly at
the threshold count despite binary floating point. Unknown direction or a missing
score gives NA: such a pair is not judged. `is_improved` is the mirror image.

`threshold_sensitivity()` returns, per (task, model_id, arm, metric, threshold),
the columns of THRESHOLD_SENSITIVITY_SCHEMA:

    n_pairs            pairs judged (both scores present, direction known)
    n_degraded         pairs degraded at that threshold
    n_improved         pairs improved by at least the same margin (mirror rule)
    n_unchanged        the rest: ties and changes smaller than the margin
    degradation_pct    100 * n_degraded / n_pairs (the paper's Delta_M at that threshold)
    improvement_pct    100 * n_improved / n_pairs
    sign_test_p        one-sided exact sign test that degradation is more likely than
                       improvement: scipy.stats.binomtest(n_degraded, n_degraded +
                       n_improved, 0.5, alternative='greater'); unchanged pairs do not count
    reason             why a value is NULL ('n=0', 'no degraded or improved pairs')
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ableaudit.stats._common import Reasons, finite, group_key_values, require_columns, typed_frame

EPS = 1e-9  # the same slack as macros/is_degraded.sql
DEFAULT_THRESHOLDS = (0.0, 0.01, 0.05, 0.10, 0.20)  # VLM paper D.1, AccessEval B.3
DIRECTIONS = ("higher_is_better", "lower_is_better")

THRESHOLD_SENSITIVITY_SCHEMA: dict[str, str] = {
    "task": "str",
    "model_id": "str",
    "arm": "str",
    "metric": "str",
    "direction": "str",
    "threshold": "float64",
    "n_pairs": "int64",
    "n_degraded": "int64",
    "n_improved": "int64",
    "n_unchanged": "int64",
    "degradation_pct": "float64",
    "improvement_pct": "float64",
    "sign_test_p": "float64",
    "reason": "str",
}


def _numeric(x) -> np.ndarray:
    flat = pd.Series(np.ravel(np.asarray(x, dtype=object)), dtype=object)
    values = pd.to_numeric(flat, errors="coerce")
    return pd.Series(values).to_numpy(dtype=float, na_value=np.nan).reshape(np.shape(x))


def _rule(neutral, disability, direction, threshold, worse: bool):
    args = (neutral, disability, direction, threshold)
    index = next((x.index for x in args if isinstance(x, pd.Series)), None)
    n, d, dirs, thr = np.broadcast_arrays(
        _numeric(neutral), _numeric(disability), np.asarray(direction, dtype=object), _numeric(threshold)
    )
    higher = dirs == "higher_is_better"
    lower = dirs == "lower_is_better"
    gap = np.where(higher, n - d, d - n)  # > 0: worse in the metric's own direction
    if not worse:
        gap = -gap
    with np.errstate(invalid="ignore"):
        hit = (gap > 0) & (gap >= thr * np.abs(n) - EPS)
    known = (higher | lower) & np.isfinite(n) & np.isfinite(d) & np.isfinite(thr)
    if all(np.ndim(x) == 0 for x in args):
        return bool(hit) if bool(known) else pd.NA
    out = pd.array(np.ravel(hit), dtype="boolean")
    out[~np.ravel(known)] = pd.NA
    return pd.Series(out, index=index if index is not None and len(index) == len(out) else None)


def is_degraded(neutral, disability, direction, threshold):
    """Vectorised Eq. 1 (see module docstring). Scalars in -> scalar (True/False/pd.NA) out;
    array-likes (broadcast) -> a 'boolean' Series, NA where a pair is not judged."""
    return _rule(neutral, disability, direction, threshold, worse=True)


def is_improved(neutral, disability, direction, threshold):
    """The mirror of is_degraded: strictly better by at least threshold x |neutral|."""
    return _rule(neutral, disability, direction, threshold, worse=False)


def threshold_sensitivity(
    pairs: pd.DataFrame,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    keys: Sequence[str] = ("task", "model_id", "arm", "metric"),
) -> pd.DataFrame:
    """Degradation rate and sign test per (task, model_id, arm, metric) and threshold.

    Input columns: the `keys`, direction, neutral_score, disability_score. Every
    group gets one row per threshold, also when none of its pairs can be judged.
    """
    keys = list(keys)
    require_columns(pairs, keys + ["direction", "neutral_score", "disability_score"], "threshold_sensitivity")
    rows = []
    for key, g in pairs.groupby(keys, sort=True, dropna=False):
        key = group_key_values(key)
        directions = g["direction"].dropna().unique()
        for thr in thresholds:
            deg = is_degraded(g["neutral_score"], g["disability_score"], g["direction"], thr)
            imp = is_improved(g["neutral_score"], g["disability_score"], g["direction"], thr)
            judged = deg.notna().to_numpy()
            n = int(judged.sum())
            n_deg = int(deg[judged].sum())
            n_imp = int(imp[judged].sum())
            why = Reasons()
            p = float("nan")
            if n == 0:
                why.add("degradation_pct", "n=0")
                why.add("sign_test", "n=0")
            elif n_deg + n_imp == 0:
                why.add("sign_test", "no degraded or improved pairs")
            else:
                p = finite(stats.binomtest(n_deg, n_deg + n_imp, 0.5, alternative="greater").pvalue)
            if len(g) > n:
                why.add("n_pairs", f"{len(g) - n} pair(s) not judged (missing score or unknown direction)")
            rows.append({
                **dict(zip(keys, key)),
                "direction": directions[0] if len(directions) == 1 else None,
                "threshold": float(thr),
                "n_pairs": n,
                "n_degraded": n_deg,
                "n_improved": n_imp,
                "n_unchanged": n - n_deg - n_imp,
                "degradation_pct": 100.0 * n_deg / n if n else float("nan"),
                "improvement_pct": 100.0 * n_imp / n if n else float("nan"),
                "sign_test_p": p,
                "reason": why.text,
            })
    schema = dict(THRESHOLD_SENSITIVITY_SCHEMA)
    if keys != ["task", "model_id", "arm", "metric"]:
        schema = {**{k: "str" for k in keys}, **{k: v for k, v in schema.items()
                                                 if k not in ("task", "model_id", "arm", "metric")}}
    return typed_frame(rows, schema)
