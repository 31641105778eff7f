"""ableaudit.stats.clustered against statsmodels and scipy, and the rule of `significant`."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.weightstats import DescrStatsW

from ableaudit import PROJECT_ROOT
from ableaudit.stats import significance
from ableaudit.stats.clustered import (
    cluster_means,
    is_significant,
    minimum_detectable_diff,
    query_t_test,
)


def shared_neutral_pairs(seed: int, queries: int = 6, shift: float = 0.0, tau: float = 2.0):
    """Nine pairs per query sharing one neutral answer, with a query-level random shift."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(queries):
        neutral = rng.normal(10.0, 1.0)
        b = shift + rng.normal(0.0, tau)
        for k in range(9):
            rows.append(
                dict(
                    task="text",
                    model_id="m",
                    arm="baseline",
                    metric="verbosity",
                    direction="lower_is_better",
                    domain=["education", "health"][q % 2],
                    disability_id=f"d{k}",
                    query_id=f"q{q}",
                    neutral_score=neutral,
                    disability_score=neutral + b + rng.normal(0.0, 0.3),
                )
            )
    return pd.DataFrame(rows)


def test_query_t_test_is_statsmodels_one_sample_t_of_the_query_means():
    pairs = shared_neutral_pairs(1, queries=8, shift=0.5)
    pairs = pairs.iloc[np.r_[0:60, 63:72]]  # unequal pairs per query
    diffs = (pairs.disability_score - pairs.neutral_score).to_numpy()
    means = pairs.assign(d=diffs).groupby("query_id").d.mean()
    t, p, why = query_t_test(diffs, pairs.query_id.to_numpy())
    expected = DescrStatsW(means.to_numpy()).ttest_mean(0.0)
    assert why is None
    assert t == pytest.approx(expected[0], rel=1e-12) and p == pytest.approx(expected[1], rel=1e-12)
    np.testing.assert_allclose(cluster_means(diffs, pairs.query_id), means.to_numpy(), rtol=1e-12)


def test_query_t_test_degenerate_cases_have_reasons():
    assert query_t_test([1.0, 2.0, 3.0], ["a", "a", "a"])[2] == "fewer than 2 queries"
    t, p, why = query_t_test([1.0, 3.0, 2.0, 2.0], ["a", "a", "b", "b"])  # both means 2
    assert np.isnan(t) and np.isnan(p) and why == "zero variance of the per-query mean differences"
    assert np.isnan(minimum_detectable_diff([1.0, 2.0], ["a", "a"])[0])


@pytest.mark.parametrize("queries", [2, 3, 6, 20, 200])
def test_minimum_detectable_diff_has_80_percent_power_by_scipy_noncentral_t(queries):
    rng = np.random.default_rng(queries)
    diffs = rng.normal(0.0, 1.0, size=queries * 9)
    clusters = np.repeat(np.arange(queries), 9)
    mde, why = minimum_detectable_diff(diffs, clusters)
    assert why is None and mde > 0
    sd = np.std(cluster_means(diffs, clusters), ddof=1)
    df = queries - 1
    crit = stats.t.ppf(0.975, df)
    nc = mde / sd * np.sqrt(queries)
    power = stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)
    assert power == pytest.approx(0.80, abs=1e-4)  # the solver stops within 1e-5


def test_minimum_detectable_diff_shrinks_with_more_queries_not_with_more_pairs_per_query():
    means = [1.0, -1.0, 0.5, -0.2]
    few, _ = minimum_detectable_diff(np.repeat(means, 9), np.repeat(range(4), 9))
    # the same four query means, each from 90 pairs: the clustering keeps the MDE where it was
    many, _ = minimum_detectable_diff(np.repeat(means, 90), np.repeat(range(4), 90))
    assert many == pytest.approx(few, rel=1e-12)
    more, _ = minimum_detectable_diff(np.repeat(means * 4, 9), np.repeat(range(16), 9))
    assert more < few / 2


@settings(max_examples=300, deadline=None)
@given(
    p=st.floats(0.0, 1.0),
    low=st.floats(-5, 5, allow_nan=False),
    width=st.floats(0, 5, allow_nan=False),
)
def test_significant_never_beside_an_interval_that_contains_zero(p, low, width):
    high = low + width
    called = is_significant(p, low, high)
    if low <= 0.0 <= high:
        assert not called
    assert called == (p < 0.05 and (low > 0 or high < 0))
    assert not is_significant(float("nan"), low, high) and not is_significant(p, np.nan, np.nan)


def test_pair_level_test_rejects_where_the_query_level_test_does_not():
    """Six queries, nine pairs sharing each neutral answer, a query-level spread and no true
    shift: the papers' test counts 54 independent pairs and rejects; the slice is not significant."""
    found = 0
    for seed in range(40):
        s = significance(shared_neutral_pairs(seed), n_boot=400, seed=seed)
        overall = s[s.slice == "overall"].iloc[0]
        assert overall.n_pairs == 54 and overall.n_clusters == 6
        means = shared_neutral_pairs(seed).pipe(
            lambda f: (f.disability_score - f.neutral_score).groupby(f.query_id).mean()
        )
        assert overall.query_t_p == pytest.approx(stats.ttest_1samp(means, 0.0).pvalue, rel=1e-10)
        if overall.paper_t_p < 0.05 and overall.query_t_p >= 0.05:
            found += 1
            assert not overall.significant
        for row in s.itertuples():
            if row.significant:
                assert row.ci_low > 0 or row.ci_high < 0
                assert row.p_holm < 0.05
    assert found >= 10  # the naive test's false alarms are common under this design


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_null_simulation", PROJECT_ROOT / "bench" / "null_simulation.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_null_simulation"] = module
    spec.loader.exec_module(module)
    return module


def test_null_simulation_separates_the_naive_test_from_the_chosen_one():
    """A short run of bench/null_simulation.py: the query-level test near 5 %, the naive above."""
    bench = _bench()
    args = bench.argparse.Namespace(
        reps=400, mixedlm_reps=0, n_boot=200, tau=0.5, sigma=1.0, seed=3
    )
    rates = bench.run_design(args, 20, 1)
    chosen, se, n = rates["query t (chosen)"]
    assert n == 400 and abs(chosen - 0.05) < 3.5 * se + 1e-9
    assert rates["paper t (pairs)"][0] > 0.2
    assert rates["significant"][0] <= chosen
