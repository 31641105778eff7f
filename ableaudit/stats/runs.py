"""Run-to-run comparison of binary pair flags (mart `run_comparison`).

Input, `flags`: one row per included pair of one cohort (a run or a model revision)
and measure, long format, as int_run_pair_flags gives it:

    cohort_id, pair_id, query_set, query_id, domain, disability_id, flagged (bool)

`compare_cohorts(baseline, candidate)` compares the flag rates of two cohorts of one
target, per slice ('overall'/'all', each domain, each disability), and returns the
columns of COMPARISON_STATS_SCHEMA:

    n_baseline_pairs, n_candidate_pairs   included pairs of each cohort in the slice
    n_units        units (pair_id) included in both cohorts: the matched units
    paired         True when the matched units are at least half of each cohort's pairs;
                   the statistics then read the matched units only
    baseline_rate, candidate_rate         flag rates in % (over the matched units when paired)
    change         candidate_rate - baseline_rate, percentage points
    change_ci_low, change_ci_high
                   95% percentile bootstrap CI of the change, whole queries (images)
                   resampled: paired, the per-unit differences of a drawn query move
                   together (cluster_bootstrap_ci); unpaired, each cohort's queries are
                   resampled on their own and the replicate rates subtracted
    p_value, test  paired: McNemar's exact test (two-sided exact binomial on the
                   discordant units, scipy.stats.binomtest; 1 when none is discordant);
                   unpaired: Fisher's exact test on the 2x2 counts
    flag           'inconclusive' under `min_units` units (matched when paired, else the
                   smaller cohort) or without a CI; else 'regressed' when the CI lies
                   above 0, 'improved' when below, 'unchanged' when it holds 0.
                   A higher rate is always worse (degradation, refusal, mismatch,
                   a contrastive judge's Yes)
    flag_rule      the rule above, in words, with min_units
    reason         why the flag is 'inconclusive' or a statistic is NULL, else NULL
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ableaudit.stats._common import stable_seed
from ableaudit.stats.paired import cluster_bootstrap_ci

COMPARISON_STATS_SCHEMA: dict[str, str] = {
    "slice": "str",
    "slice_value": "str",
    "n_baseline_pairs": "int64",
    "n_candidate_pairs": "int64",
    "n_units": "int64",
    "paired": "bool",
    "baseline_rate": "float64",
    "candidate_rate": "float64",
    "change": "float64",
    "change_ci_low": "float64",
    "change_ci_high": "float64",
    "p_value": "float64",
    "test": "str",
    "flag": "str",
    "flag_rule": "str",
    "reason": "str",
}

FLAG_COLUMNS = ["pair_id", "query_set", "query_id", "domain", "disability_id", "flagged"]
SLICES = ("overall", "domain", "disability")


def flag_rule(min_units: int) -> str:
    return (
        "regressed when the 95% CI of the change lies above 0, improved when below 0, "
        f"unchanged when it holds 0; inconclusive under {min_units} units or without a CI"
    )


def _slices(frame: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    out = [("overall", "all", frame)]
    for name, column in (("domain", "domain"), ("disability", "disability_id")):
        for value, group in frame.groupby(column, sort=True, dropna=True):
            out.append((name, str(value), group))
    return out


def _cluster(frame: pd.DataFrame) -> np.ndarray:
    return (frame.query_set.astype(str) + "\x1f" + frame.query_id.astype(str)).to_numpy()


def _unpaired_ci(
    base: pd.DataFrame, cand: pd.DataFrame, n_boot: int, seed: np.random.SeedSequence
) -> tuple[float, float, str | None]:
    """Percentile CI of rate(cand) - rate(base), each cohort's queries resampled on their own."""
    rng = np.random.default_rng(seed)
    reps = []
    for frame in (base, cand):
        codes, uniques = pd.factorize(_cluster(frame), sort=True)
        k = len(uniques)
        if k < 2:
            return float("nan"), float("nan"), "fewer than 2 queries in a cohort"
        sums = np.bincount(codes, weights=frame.flagged.to_numpy(float) * 100.0, minlength=k)
        counts = np.bincount(codes, minlength=k).astype(float)
        idx = rng.integers(0, k, size=(n_boot, k))
        reps.append(sums[idx].sum(axis=1) / counts[idx].sum(axis=1))
    low, high = np.quantile(reps[1] - reps[0], [0.025, 0.975])
    return float(low), float(high), None


def _compare_slice(
    base: pd.DataFrame,
    cand: pd.DataFrame,
    n_boot: int,
    seed: np.random.SeedSequence,
    min_units: int,
) -> dict:
    matched = base.merge(cand[["pair_id", "flagged"]], on="pair_id", suffixes=("_b", "_c"))
    n_b, n_c, n_m = len(base), len(cand), len(matched)
    paired = n_m > 0 and n_m >= 0.5 * n_b and n_m >= 0.5 * n_c
    row: dict = dict(n_baseline_pairs=n_b, n_candidate_pairs=n_c, n_units=n_m, paired=paired)
    reasons: list[str] = []
    low = high = p = float("nan")
    test = None
    if paired:
        b = matched.flagged_b.to_numpy(bool)
        c = matched.flagged_c.to_numpy(bool)
        row["baseline_rate"], row["candidate_rate"] = 100.0 * b.mean(), 100.0 * c.mean()
        diffs = (c.astype(float) - b.astype(float)) * 100.0
        low, high, why = cluster_bootstrap_ci(diffs, _cluster(matched), n_boot=n_boot, seed=seed)
        if why:
            reasons.append(f"ci: {why}")
        worse, better = int((c & ~b).sum()), int((b & ~c).sum())
        test = "mcnemar_exact"
        p = (
            1.0
            if worse + better == 0
            else float(stats.binomtest(worse, worse + better, 0.5).pvalue)
        )
        n_eff = n_m
    else:
        if n_b and n_c:
            row["baseline_rate"] = 100.0 * base.flagged.to_numpy(bool).mean()
            row["candidate_rate"] = 100.0 * cand.flagged.to_numpy(bool).mean()
            low, high, why = _unpaired_ci(base, cand, n_boot, seed)
            if why:
                reasons.append(f"ci: {why}")
            table = [
                [int(cand.flagged.sum()), n_c - int(cand.flagged.sum())],
                [int(base.flagged.sum()), n_b - int(base.flagged.sum())],
            ]
            test = "fisher_exact"
            p = float(stats.fisher_exact(table).pvalue)
        else:
            reasons.append("a cohort has no included pair in this slice")
        if n_m:
            reasons.append(f"unpaired: {n_m} matched units are under half of a cohort's pairs")
        n_eff = min(n_b, n_c)
    row["change"] = row.get("candidate_rate", np.nan) - row.get("baseline_rate", np.nan)
    row.update(change_ci_low=low, change_ci_high=high, p_value=p, test=test)
    if n_eff < min_units:
        row["flag"] = "inconclusive"
        what = "matched units" if paired else "pairs in the smaller cohort"
        reasons.insert(0, f"{n_eff} {what}, fewer than {min_units}")
    elif not (np.isfinite(low) and np.isfinite(high)):
        row["flag"] = "inconclusive"
    elif low > 0:
        row["flag"] = "regressed"
    elif high < 0:
        row["flag"] = "improved"
    else:
        row["flag"] = "unchanged"
    row["flag_rule"] = flag_rule(min_units)
    row["reason"] = "; ".join(reasons) if reasons else None
    return row


def compare_cohorts(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    n_boot: int = 2000,
    seed: int = 0,
    min_units: int = 10,
    key: tuple = (),
) -> pd.DataFrame:
    """One row per slice present in either cohort; see the module docstring. ``key`` names the
    comparison (target, cohorts, measure) so its bootstrap stream does not depend on other groups."""
    base = baseline[FLAG_COLUMNS].copy()
    cand = candidate[FLAG_COLUMNS].copy()
    rows = []
    cand_slices = {(name, value): frame for name, value, frame in _slices(cand)}
    base_slices = {(name, value): frame for name, value, frame in _slices(base)}
    for name, value in sorted(
        set(cand_slices) | set(base_slices), key=lambda k: (SLICES.index(k[0]), k[1])
    ):
        b = base_slices.get((name, value), base.iloc[0:0])
        c = cand_slices.get((name, value), cand.iloc[0:0])
        row = _compare_slice(b, c, n_boot, stable_seed(seed, *key, name, value), min_units)
        rows.append({"slice": name, "slice_value": value, **row})
    out = pd.DataFrame(rows, columns=list(COMPARISON_STATS_SCHEMA))
    return out
