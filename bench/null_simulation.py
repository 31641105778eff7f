"""False-positive rate of each candidate test of a slice's mean shift, under a true null with
the audit's dependence: the test the `significance` mart's p-values follow is chosen here.

Why: in the `overall` and `domain` slices one neutral answer is paired with nine
disability-aware answers (one per category), and a query may be answered at several samples.
The pairs of one query share the neutral answer's noise and the query's own shift, so they are
not independent. The simulation draws, per replicate, ``--queries`` queries of ``--samples``
samples each; per query a shift b_q ~ N(0, tau) (the query-level random effect; its mean, the
true shift, is 0) and per sample one neutral score a_q + e (e ~ N(0, sigma)) shared by nine
disability scores a_q + b_q + f_k (f ~ N(0, sigma)). Each test is run on the pair
differences of the replicate, and the share of replicates it rejects at alpha 0.05 is printed,
with its binomial standard error. A valid test rejects 5%; a test that treats the pairs as
independent rejects more.

Candidates:
    paper t (pairs)       scipy ttest_rel over the pairs: the papers' test (mart: paper_t_p)
    Wilcoxon (pairs)      scipy wilcoxon over the pairs (mart: pair_wilcoxon_p)
    query t               ableaudit.stats.clustered.query_t_test: one-sample t of the
                          per-query mean differences (mart: query_t_p, p_holm, p_bh)
    sign-flip (queries)   scipy permutation_test flipping the sign of whole queries' means
    MixedLM               statsmodels MixedLM, diff ~ 1 with a random intercept per query,
                          Wald z of the intercept (fewer replicates: a fit takes ~20 ms)
    bootstrap CI          ableaudit.stats.paired.cluster_bootstrap_ci (whole queries
                          resampled) excludes 0 (mart: ci_low, ci_high)
    significant           query t p < alpha and the bootstrap CI excludes 0 (mart: significant)

    .venv/bin/python bench/null_simulation.py                       # 4,000 replicates per design
    .venv/bin/python bench/null_simulation.py --reps 1000 --mixedlm-reps 100
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import statsmodels.formula.api as smf
from scipy import stats

from ableaudit.stats.clustered import ALPHA, query_t_test
from ableaudit.stats.paired import cluster_bootstrap_ci

CATEGORIES = 9
"""Disability-aware answers per neutral answer (the taxonomy's nine categories)."""

DESIGNS = ((6, 1), (20, 1), (60, 1), (20, 3))
"""(queries, samples per query): 6 queries is an audit of the test server with --subset 2."""


def simulate(rng: np.random.Generator, queries: int, samples: int, tau: float, sigma: float):
    """One replicate under the null: (pair differences, query id of each pair)."""
    shift = rng.normal(0.0, tau, size=queries)  # query-level random effect, mean 0
    level = rng.normal(0.0, 1.0, size=queries)  # the query's own score level
    neutral = level[:, None] + rng.normal(0.0, sigma, size=(queries, samples))
    disability = (level + shift)[:, None, None] + rng.normal(
        0.0, sigma, size=(queries, samples, CATEGORIES)
    )
    diffs = (disability - neutral[:, :, None]).ravel()
    clusters = np.repeat(np.arange(queries), samples * CATEGORIES)
    return diffs, clusters


def _query_means(diffs: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    return np.bincount(clusters, weights=diffs) / np.bincount(clusters)


def sign_flip_p(diffs: np.ndarray, clusters: np.ndarray, rng: np.random.Generator) -> float:
    means = _query_means(diffs, clusters)
    res = stats.permutation_test(
        (means,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        n_resamples=999,
        vectorized=True,
        random_state=rng,
    )
    return float(res.pvalue)


def mixedlm_p(diffs: np.ndarray, clusters: np.ndarray) -> float:
    import pandas as pd

    frame = pd.DataFrame({"diff": diffs, "query": clusters})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm("diff ~ 1", frame, groups=frame["query"]).fit(reml=True)
    return float(fit.pvalues["Intercept"])


def run_design(args: argparse.Namespace, queries: int, samples: int) -> dict[str, tuple]:
    rng = np.random.default_rng([args.seed, queries, samples])
    rejects: dict[str, list[bool]] = {}

    def add(name: str, rejected: bool) -> None:
        rejects.setdefault(name, []).append(bool(rejected))

    for rep in range(args.reps):
        diffs, clusters = simulate(rng, queries, samples, args.tau, args.sigma)
        add("paper t (pairs)", stats.ttest_1samp(diffs, 0.0).pvalue < ALPHA)
        add("Wilcoxon (pairs)", stats.wilcoxon(diffs).pvalue < ALPHA)
        _, p, _ = query_t_test(diffs, clusters)
        add("query t (chosen)", p < ALPHA)
        add("sign-flip (queries)", sign_flip_p(diffs, clusters, rng) < ALPHA)
        low, high, _ = cluster_bootstrap_ci(diffs, clusters, n_boot=args.n_boot, seed=rng)
        outside = low > 0 or high < 0
        add("bootstrap CI excl. 0", outside)
        add("significant", p < ALPHA and outside)
        if rep < args.mixedlm_reps:
            add("MixedLM (query)", mixedlm_p(diffs, clusters) < ALPHA)
    out = {}
    for name, flags in rejects.items():
        rate = float(np.mean(flags))
        out[name] = (rate, float(np.sqrt(rate * (1 - rate) / len(flags))), len(flags))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=4000, help="replicates per design")
    ap.add_argument("--mixedlm-reps", type=int, default=300, help="replicates fitted by MixedLM")
    ap.add_argument("--n-boot", type=int, default=500, help="bootstrap replicates per CI")
    ap.add_argument("--tau", type=float, default=0.5, help="sd of the query-level shift")
    ap.add_argument("--sigma", type=float, default=1.0, help="sd of an answer's own noise")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(
        f"false-positive rate at alpha {ALPHA} under the null (true mean shift 0); "
        f"{CATEGORIES} pairs share each neutral answer; tau={args.tau}, sigma={args.sigma}"
    )
    started = time.perf_counter()
    results = {design: run_design(args, *design) for design in DESIGNS}
    names = list(next(iter(results.values())))
    header = ["test"] + [f"{q} queries x {s} sample{'s' * (s > 1)}" for q, s in DESIGNS]
    rows = [
        [name]
        + [
            f"{100 * r[name][0]:5.1f}% +/- {100 * r[name][1]:.1f} (n={r[name][2]})"
            for r in results.values()
        ]
        for name in names
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
