"""A short run of bench/rate_interval_coverage.py: under the audit's dependence the interval the
marts print (design-effect Wilson with Student's t) holds the true rate about 95 % of the time,
Wilson's over pairs far less; and the bench's design effect is statsmodels' cluster variance."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import statsmodels.api as sm

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_rate_interval_coverage", PROJECT_ROOT / "bench" / "rate_interval_coverage.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_rate_interval_coverage"] = module
    spec.loader.exec_module(module)
    return module


def test_the_chosen_interval_covers_and_wilson_over_pairs_does_not():
    bench = _bench()
    cov = bench.coverage(reps=600, queries=20, samples=1, rate=0.2, tau=0.5, n_boot=100, seed=4)
    se = np.sqrt(0.95 * 0.05 / 600)
    assert abs(cov["design-effect Wilson, t (chosen)"] - 0.95) < 4 * se
    assert cov["Wilson (pairs)"] < 0.8


def test_the_bench_variance_is_statsmodels_cluster_variance():
    bench = _bench()
    rng = np.random.default_rng(0)
    flags = bench.simulate(rng, reps=3, queries=8, samples=2, rate=0.3, tau=0.5)
    p, v = bench.cluster_variance(flags)
    for i, f in enumerate(flags):
        y = f.ravel()
        groups = np.repeat(np.arange(f.shape[0]), f.shape[1])
        fit = sm.OLS(y, np.ones((y.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": groups})
        assert p[i] == pytest.approx(fit.params[0], rel=1e-12)
        assert v[i] == pytest.approx(fit.bse[0] ** 2, rel=1e-10)
