"""Rank statistics over few units, with exact small-sample p-values.

A rank correlation over three to ten units (models in `scaling`, items in
`agreement`) has a discrete null distribution with few values: over three
models the most extreme rho has p = 2/3! = 1/3, never less. scipy's spearmanr
reads p from a t distribution, which gives p = 0 for rho = +-1 at any n. Up to
EXACT_SPEARMAN_MAX_N units the p-value here is instead exact: the permutation
test over all n! pairings of the two samples (what scipy.stats.permutation_test
computes by enumeration, here from the exact null distribution: spearman_exact_p),
with ties kept as average ranks. Above it, the t approximation of spearmanr.

`spearman_test` returns the method it used, so a mart can say which p it reports:

    'exact_permutation'   all n! pairings enumerated (n <= EXACT_SPEARMAN_MAX_N)
    't_approx'            scipy.stats.spearmanr's t distribution with n - 2 df
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

from ableaudit.stats._common import finite, is_zero_sd, quiet_call

EXACT_SPEARMAN_MAX_N = 10  # 10! = 3,628,800 pairings, counted over 2^10 subsets

SPEARMAN_EXACT = "exact_permutation"
SPEARMAN_T = "t_approx"


class SpearmanResult(NamedTuple):
    rho: float
    """Spearman's rho (average ranks for ties); NaN with a reason when undefined."""
    p: float
    """Two-sided p; NaN with a reason when undefined."""
    method: str | None
    """How p was obtained (SPEARMAN_EXACT or SPEARMAN_T); None when there is no p."""
    reason: str | None
    """Why rho or p is NaN, else None."""


def spearman_exact_p(x, y) -> float:
    """Two-sided exact p of Spearman's rho over all n! pairings of x with y.

    What scipy.stats.permutation_test(permutation_type='pairings',
    n_resamples=inf) returns for rho (2 x the smaller tail, at most 1), from the
    exact null distribution instead of enumerating the pairings: rho is an
    increasing function of S = sum(2 rank_x[i] x 2 rank_y[pi(i)]) (doubled
    average ranks are integers, also with ties), and the count of pairings
    reaching each S is built position by position over the subsets of y's
    ranks already used (2^n subsets; 10 units take milliseconds, not the
    seconds of the 3.6 million pairings).
    """
    a = np.rint(2 * stats.rankdata(np.asarray(x, dtype=float))).astype(np.int64)
    b = np.rint(2 * stats.rankdata(np.asarray(y, dtype=float))).astype(np.int64)
    n = int(a.size)
    gain = np.outer(a, b)  # gain[i, j]: position i paired with y's j-th value
    top = int(np.sort(a) @ np.sort(b))  # the largest S (rearrangement inequality)
    counts = np.zeros((1 << n, top + 1))  # counts <= 10! are exact in float64
    counts[0, 0] = 1.0
    for used in range(1 << n):  # every subset comes after all of its subsets
        row = counts[used]
        if not row.any():
            continue
        i = used.bit_count()
        for j in range(n):
            if not used >> j & 1:
                g = int(gain[i, j])
                counts[used | 1 << j, g:] += row[: top + 1 - g]
    null = counts[-1]
    observed = int(a @ b)
    total = null.sum()
    less, greater = null[: observed + 1].sum() / total, null[observed:].sum() / total
    return float(min(1.0, 2.0 * min(less, greater)))


def spearman_test(x, y, exact_max_n: int = EXACT_SPEARMAN_MAX_N) -> SpearmanResult:
    """Spearman's rho of x and y with an exact p up to `exact_max_n` units (see the module docstring).

    NaN rho and p with a reason for fewer than 3 units or a constant sample.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    nan = float("nan")
    n = int(x.size)
    if n < 3:
        return SpearmanResult(nan, nan, None, "n<3")
    if is_zero_sd(x) or is_zero_sd(y):
        return SpearmanResult(nan, nan, None, "a constant sample has no ranks to correlate")
    res, warns, err = quiet_call(stats.spearmanr, x, y)
    rho = finite(res.statistic) if res is not None else nan
    if np.isnan(rho):
        return SpearmanResult(
            nan, nan, None, str(err) if err else (warns[0] if warns else "undefined")
        )
    if n <= exact_max_n:
        return SpearmanResult(rho, spearman_exact_p(x, y), SPEARMAN_EXACT, None)
    p = finite(res.pvalue)
    return SpearmanResult(
        rho,
        p,
        SPEARMAN_T if not np.isnan(p) else None,
        None if not np.isnan(p) else (warns[0] if warns else "p undefined"),
    )
