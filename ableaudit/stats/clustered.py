"""Inference that respects the audit's design: pairs that share a query are not independent.

In a pooled slice (``overall``, a domain) one neutral answer is paired with up to nine
disability-aware answers, and one query may be answered at several temperatures and samples.
A test that counts each pair as an independent observation then rejects a true null far more
often than its nominal level (``bench/null_simulation.py`` measures how often). The unit of
replication is the query: the tests here reduce each query to its mean difference first.

    cluster_means            per-cluster (query) mean of the pair differences
    query_t_test             one-sample t-test of the per-query mean differences against 0
                             (the paired t-test with the query as the unit): the test the
                             `significance` mart's p_holm, p_bh and `significant` follow
    minimum_detectable_diff  the smallest |mean shift| that test detects with the given power
    is_significant           adjusted p below alpha AND the query-cluster interval excludes 0
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestPower

from ableaudit.stats._common import finite, is_zero_sd, quiet_call

ALPHA = 0.05
"""Two-sided level of every test and interval the significance mart calls significant."""
POWER = 0.80
"""Power at which the minimum detectable difference is reported."""

FEWER_THAN_2 = "fewer than 2 queries"
NO_SPREAD = "zero variance of the per-query mean differences"


def cluster_means(
    diffs: Sequence[float] | np.ndarray, clusters: Sequence | np.ndarray
) -> np.ndarray:
    """The mean difference of each cluster, clusters in sorted order; non-finite diffs left out."""
    d = np.asarray(diffs, dtype=float)
    c = pd.Series(np.asarray(clusters, dtype=object))
    ok = np.isfinite(d) & c.notna().to_numpy()
    if not ok.any():
        return np.empty(0)
    codes, uniques = pd.factorize(c[ok], sort=True)
    sums = np.bincount(codes, weights=d[ok], minlength=len(uniques))
    counts = np.bincount(codes, minlength=len(uniques))
    return sums / counts


def query_t_test(
    diffs: Sequence[float] | np.ndarray, clusters: Sequence | np.ndarray
) -> tuple[float, float, str | None]:
    """(t, two-sided p, reason) of the one-sample t-test of the per-cluster mean differences.

    Each query counts once whatever its number of pairs, so the pairs that share a neutral
    answer (or a query's temperatures and samples) cannot inflate the evidence; its degrees of
    freedom are the number of queries minus one. The sign of t is the sign of the mean of the
    query means (that of mean_diff too, unless the queries have unequal numbers of pairs).
    """
    return t_test_of_means(cluster_means(diffs, clusters))


def t_test_of_means(means: np.ndarray) -> tuple[float, float, str | None]:
    """``query_t_test`` from the per-cluster mean differences."""
    nan = float("nan")
    if means.size < 2:
        return nan, nan, FEWER_THAN_2
    if is_zero_sd(means):
        return nan, nan, NO_SPREAD
    res, warns, err = quiet_call(stats.ttest_1samp, means, 0.0)
    t, p = (finite(res.statistic), finite(res.pvalue)) if res is not None else (nan, nan)
    if np.isnan(p):
        return nan, nan, str(err) if err else (warns[0] if warns else "undefined")
    return t, p, None


@lru_cache(maxsize=512)
def _detectable_effect_size(n_clusters: int, alpha: float, power: float) -> float:
    """Standardised effect (mean / sd of the query means) the t-test detects with `power`."""
    res, _, _ = quiet_call(
        TTestPower().solve_power,
        effect_size=None,
        nobs=n_clusters,
        alpha=alpha,
        power=power,
        alternative="two-sided",
    )
    return finite(np.asarray(res).item()) if res is not None else float("nan")


def minimum_detectable_diff(
    diffs: Sequence[float] | np.ndarray,
    clusters: Sequence | np.ndarray,
    alpha: float = ALPHA,
    power: float = POWER,
) -> tuple[float, str | None]:
    """(difference, reason): the smallest |mean shift|, in the metric's units, that
    `query_t_test` detects at `alpha` with probability `power`, taking the observed spread of
    the per-query mean differences as the truth (statsmodels' noncentral-t power of the
    one-sample t-test). The clustering is in it: a query's pairs count once, through their mean.
    """
    return detectable_diff_of_means(cluster_means(diffs, clusters), alpha, power)


def detectable_diff_of_means(
    means: np.ndarray, alpha: float = ALPHA, power: float = POWER
) -> tuple[float, str | None]:
    """``minimum_detectable_diff`` from the per-cluster mean differences."""
    if means.size < 2:
        return float("nan"), FEWER_THAN_2
    if is_zero_sd(means):
        return float("nan"), NO_SPREAD
    effect = _detectable_effect_size(int(means.size), float(alpha), float(power))
    if np.isnan(effect):
        return float("nan"), f"no effect size reaches power {power:g} with {means.size} queries"
    return float(effect * np.std(means, ddof=1)), None


def is_significant(p_adjusted: float, ci_low: float, ci_high: float, alpha: float = ALPHA) -> bool:
    """The rule of the `significant` column: the multiplicity-adjusted query-level p is below
    alpha AND the query-cluster bootstrap interval shown beside it excludes 0. Both resample or
    count whole queries, so they rarely disagree; when they do, the slice is not called
    significant, and a slice called significant never has an interval that contains 0."""
    if not all(np.isfinite(v) for v in (p_adjusted, ci_low, ci_high)):
        return False
    return bool(p_adjusted < alpha and (ci_low > 0.0 or ci_high < 0.0))
