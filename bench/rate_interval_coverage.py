"""Coverage of each candidate 95% interval of a degradation rate when a query gives several
pairs: the interval the `degradation` and `interpretive_shift` marts print (rate_ci_*) is
chosen here.

Why: in a domain cell one neutral answer is paired with the nine disability-aware answers of
its query, and a query may be answered at several samples. Pairs of one query share the
neutral answer's noise and the query's own shift, so their degraded flags are correlated; an
interval that takes them as independent pairs is too narrow. The simulation draws, per
replicate, ``queries`` queries of ``samples`` samples, as bench/null_simulation.py does: per
query a shift b_q ~ N(0, tau), per sample one neutral score e ~ N(0, 1) shared by the nine
disability-aware scores b_q + f (f ~ N(0, 1)); a pair is degraded when its disability score is
below its neutral score by more than a margin set so that the true rate is ``rate``. It prints
the share of replicates whose interval holds the true rate (95% is right; less is too narrow).

Candidates, on the degraded flags of the replicate (x of n pairs, k queries):
    Wilson (pairs)         statsmodels proportion_confint(x, n, method='wilson'): pairs taken
                           as independent (mart: degradation_ci_low_pct, _high_pct)
    design-effect Wilson, z   Wilson at the effective number of pairs n / deff, where deff is
                           the cluster-robust variance of the rate (statsmodels OLS of the
                           flags on a constant, cov_type='cluster' by query) over p (1 - p) / n,
                           at least 1 (1 when p is 0 or 1)
    design-effect Wilson, t   the same with Student's t at k - 1 degrees of freedom in place of
                           1.96 (Korn & Graubard's adjustment); Wilson (pairs) where every
                           query gives one pair (chosen; mart: rate_ci_low_pct, _high_pct,
                           macro cluster_rate_interval)
    cluster-robust Wald    p +/- 1.96 x that cluster-robust standard error (GEE with an
                           independence working correlation, robust covariance)
    query bootstrap        percentile interval of the rate over resampled whole queries

    .venv/bin/python bench/rate_interval_coverage.py                # 2,000 replicates per cell
    .venv/bin/python bench/rate_interval_coverage.py --reps 500
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

CATEGORIES = 9
"""Disability-aware answers per neutral answer (the taxonomy's nine categories)."""

DESIGNS = ((3, 1), (6, 1), (20, 1), (60, 1), (20, 3))
"""(queries, samples per query) of a domain cell: 6 queries is a `--subset 2` audit of the test
server, 3 one of its domains."""

RATES = (0.05, 0.2, 0.5)
"""True degradation rates."""

Z = stats.norm.ppf(0.975)


def simulate(
    rng: np.random.Generator, reps: int, queries: int, samples: int, rate: float, tau: float
) -> np.ndarray:
    """Degraded flags, shape (reps, queries, samples x categories)."""
    margin = -stats.norm.ppf(rate) * np.sqrt(tau**2 + 2.0)  # P(b + f - e < -margin) = rate
    shift = rng.normal(0.0, tau, size=(reps, queries, 1, 1))
    neutral = rng.normal(0.0, 1.0, size=(reps, queries, samples, 1))
    disability = shift + rng.normal(0.0, 1.0, size=(reps, queries, samples, CATEGORIES))
    return (disability - neutral < -margin).reshape(reps, queries, -1).astype(float)


def wilson(x: np.ndarray, n: np.ndarray, quantile: np.ndarray | float):
    """statsmodels' Wilson interval of x of n at the two-sided level whose quantile is given."""
    alpha = 2.0 * stats.norm.sf(quantile)
    return proportion_confint(x, n, alpha=alpha, method="wilson")


def cluster_variance(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, var) per replicate: the rate and its cluster-robust (sandwich) variance with the
    k / (k - 1) correction, the variance statsmodels gives an OLS of the flags on a constant
    with cov_type='cluster' (tests/unit/stats/test_rate_interval_coverage.py checks it)."""
    reps, k, m = flags.shape
    per_query = flags.sum(axis=2)
    n = float(k * m)
    p = per_query.sum(axis=1) / n
    return p, k / (k - 1) * ((per_query - p[:, None] * m) ** 2).sum(axis=1) / n**2


def intervals(flags: np.ndarray, rng: np.random.Generator, n_boot: int) -> dict[str, tuple]:
    reps, k, m = flags.shape
    per_query = flags.sum(axis=2)
    n = float(k * m)
    x = per_query.sum(axis=1)
    p, v = cluster_variance(flags)
    with np.errstate(divide="ignore", invalid="ignore"):
        deff = np.where((p > 0) & (p < 1) & (v > 0), np.maximum(1.0, v * n / (p * (1 - p))), 1.0)
    n_eff = n / deff
    t = stats.t.ppf(0.975, k - 1)
    out = {
        "Wilson (pairs)": wilson(x, n, Z),
        "design-effect Wilson, z": wilson(p * n_eff, n_eff, Z),
        "design-effect Wilson, t (chosen)": wilson(x, n, Z)
        if m == 1
        else wilson(p * n_eff, n_eff, t),
        "cluster-robust Wald": (p - Z * np.sqrt(v), p + Z * np.sqrt(v)),
    }
    draws = np.empty((reps, n_boot))
    for i in range(reps):
        idx = rng.integers(0, k, size=(n_boot, k))
        draws[i] = per_query[i][idx].sum(axis=1) / n
    out["query bootstrap"] = tuple(np.quantile(draws, [0.025, 0.975], axis=1))
    return out


def coverage(
    reps: int, queries: int, samples: int, rate: float, tau: float, n_boot: int, seed: int
):
    rng = np.random.default_rng([seed, queries, samples, int(rate * 1000)])
    flags = simulate(rng, reps, queries, samples, rate, tau)
    return {
        name: float(np.mean((low <= rate + 1e-12) & (rate - 1e-12 <= high)))
        for name, (low, high) in intervals(flags, rng, n_boot).items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000, help="replicates per design and rate")
    parser.add_argument("--boot", type=int, default=400, help="bootstrap draws per replicate")
    parser.add_argument("--tau", type=float, default=0.5, help="sd of the query-level shift")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    table: dict[str, list[str]] = {}
    for queries, samples in DESIGNS:
        for rate in RATES:
            cov = coverage(args.reps, queries, samples, rate, args.tau, args.boot, args.seed)
            for name, c in cov.items():
                table.setdefault(name, []).append(f"{100 * c:.1f}")
    se = 100 * np.sqrt(0.95 * 0.05 / args.reps)
    head = [f"{q} queries x {s} sample{'s' if s > 1 else ''}" for q, s in DESIGNS]
    print(
        f"coverage (%) of a 95% interval of the rate, at true rates {' / '.join(map(str, RATES))}; "
        f"{args.reps} replicates each (standard error about {se:.1f} at 95%), tau {args.tau}"
    )
    print("| interval | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    n_rates = len(RATES)
    for name, cells in table.items():
        groups = [" / ".join(cells[i : i + n_rates]) for i in range(0, len(cells), n_rates)]
        print(f"| {name} | " + " | ".join(groups) + " |")
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
