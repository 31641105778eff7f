"""Paired significance of neutral vs disability-aware scores (issue #4, mart `significance`).

Input, `pairs`: one row per included neutral/disability-aware pair, long format:

    task, model_id, arm, metric, direction, domain, disability_id,
    <cluster_col> (query_id for text, image_id for vision),
    neutral_score, disability_score

`significance()` returns one row per (task, model_id, arm, metric, slice,
slice_value), slices 'overall' (slice_value 'all'), 'domain' and 'disability'
(optionally 'domain_disability', value 'domain|disability'), with the columns of
SIGNIFICANCE_SCHEMA:

    n_pairs, n_clusters      pairs and distinct clusters in the slice
    mean_neutral, mean_disability, mean_diff, sd_diff
                             mean_diff = mean(disability - neutral); NOT direction
                             adjusted: for a higher_is_better metric a negative
                             mean_diff is a degradation, for lower_is_better a positive one
    t_stat, t_p              scipy.stats.ttest_rel(disability, neutral), two-sided; the
                             sign of t is the sign of mean_diff. (AccessEval Table 7 reports
                             ttest_rel(NQ, DQ): the same p, t with the opposite sign.)
    anova_f, anova_p         scipy.stats.f_oneway(neutral, disability): one-way ANOVA of the
                             two conditions as two independent groups, as the papers report
                             (it ignores the pairing; t_p is the paired test)
    cohen_dz                 mean(diff) / sd(diff, ddof=1)  (= t / sqrt(n))
    cohen_d_pooled           (mean_disability - mean_neutral) / sqrt((sd_n^2 + sd_d^2) / 2),
                             sds with ddof=1: the classical pooled-SD Cohen's d for two equal
                             groups (= Lakens' d_av with root-mean-square SD); ignores pairing
    wilcoxon_p               scipy.stats.wilcoxon(diff), two-sided, zero differences dropped
                             (zero_method='wilcox'), method 'auto': exact for n <= 50 without
                             zeros or ties; with them, an exact permutation test for n <= 13
                             (computed here vectorised, same p) and the normal approximation above
    p_holm, p_bh             t_p adjusted (statsmodels multipletests 'holm' and 'fdr_bh')
                             over all slices of one (task, model_id, arm, metric) that have a t_p
    ci_low, ci_high          95% percentile CI of mean_diff from a cluster bootstrap: whole
                             clusters (queries / images) are resampled with replacement,
                             n_boot times; the statistic is the pair-weighted mean difference
    reason                   why any statistic above is NULL ('t_test: n<2; ...'), else NULL

`model_comparison()` returns one row per (task, arm, metric): a one-way ANOVA of the
per-pair differences across models (MODEL_COMPARISON_SCHEMA).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ableaudit.stats._common import (
    Reasons,
    finite,
    group_key_values,
    is_zero_sd,
    quiet_call,
    require_columns,
    stable_seed,
    typed_frame,
)

GROUP_KEYS = ["task", "model_id", "arm", "metric"]
SLICES = ("overall", "domain", "disability")
ALL_SLICES = ("overall", "domain", "disability", "domain_disability")

PAIR_COLUMNS = GROUP_KEYS + ["direction", "domain", "disability_id", "neutral_score", "disability_score"]

SIGNIFICANCE_SCHEMA: dict[str, str] = {
    "task": "str",
    "model_id": "str",
    "arm": "str",
    "metric": "str",
    "direction": "str",
    "slice": "str",
    "slice_value": "str",
    "n_pairs": "int64",
    "n_clusters": "int64",
    "mean_neutral": "float64",
    "mean_disability": "float64",
    "mean_diff": "float64",
    "sd_diff": "float64",
    "t_stat": "float64",
    "t_p": "float64",
    "anova_f": "float64",
    "anova_p": "float64",
    "cohen_dz": "float64",
    "cohen_d_pooled": "float64",
    "wilcoxon_p": "float64",
    "p_holm": "float64",
    "p_bh": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "reason": "str",
}

MODEL_COMPARISON_SCHEMA: dict[str, str] = {
    "task": "str",
    "arm": "str",
    "metric": "str",
    "k_models": "int64",
    "n_pairs": "int64",
    "n_per_model": "str",      # JSON object {model_id: n pairs}
    "mean_diff_per_model": "str",  # JSON object {model_id: mean(disability - neutral)}
    "anova_f": "float64",
    "anova_p": "float64",
    "reason": "str",
}


# --------------------------------------------------------------------------- bootstrap


def cluster_bootstrap_ci(
    diffs: Sequence[float] | np.ndarray,
    clusters: Sequence | np.ndarray,
    n_boot: int = 2000,
    seed: int | np.random.SeedSequence = 0,
    level: float = 0.95,
) -> tuple[float, float, str | None]:
    """Percentile CI of the mean of `diffs`, resampling whole clusters.

    Each replicate draws as many clusters as there are, with replacement, and
    takes the mean over all pairs of the drawn clusters (a cluster drawn twice
    counts twice). Returns (low, high, reason); low/high are NaN with a reason
    when fewer than 2 clusters or no finite diffs.
    """
    d = np.asarray(diffs, dtype=float)
    c = pd.Series(np.asarray(clusters, dtype=object))
    ok = np.isfinite(d) & c.notna().to_numpy()
    d, c = d[ok], c[ok]
    if d.size == 0:
        return float("nan"), float("nan"), "no pairs"
    codes, uniques = pd.factorize(c, sort=True)
    k = len(uniques)
    if k < 2:
        return float("nan"), float("nan"), "fewer than 2 clusters"
    if n_boot < 1:
        return float("nan"), float("nan"), "n_boot<1"
    sums = np.bincount(codes, weights=d, minlength=k)
    counts = np.bincount(codes, minlength=k).astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, k, size=(n_boot, k))
    boot = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return float(low), float(high), None


# --------------------------------------------------------------------------- Wilcoxon

# scipy.stats.wilcoxon(method='auto') runs a full permutation test when n <= 13 and
# there are zeros or ties; scipy evaluates the statistic once per sign pattern
# (about 1 s per call), too slow for hundreds of small slices. The same exact
# permutation p, vectorised:
WILCOXON_PERMUTATION_MAX_N = 13


def _has_ties(x: np.ndarray) -> bool:
    return len(np.unique(x)) < len(x)


def wilcoxon_exact_permutation_p(diff: np.ndarray) -> float:
    """Two-sided exact sign-flip permutation p of the signed-rank statistic, zeros dropped
    (Wilcoxon's zero_method): what scipy.stats.wilcoxon(diff) returns for n <= 13 with ties
    or zeros, computed over all 2^m sign patterns of the m non-zero differences at once."""
    d = np.asarray(diff, dtype=float)
    d = d[d != 0]
    if d.size == 0:
        return float("nan")
    ranks = stats.rankdata(np.abs(d))  # average ranks for ties
    observed = ranks[d > 0].sum()
    m = d.size
    signs = (np.arange(2**m)[:, None] >> np.arange(m)[None, :]) & 1
    null = signs @ ranks
    gamma = abs(np.finfo(float).eps * 100 * observed)  # scipy's tolerance for equal values
    less = np.mean(null <= observed + gamma)
    greater = np.mean(null >= observed - gamma)
    return float(min(1.0, 2.0 * min(less, greater)))


# --------------------------------------------------------------------------- one slice


def _slice_stats(neutral: np.ndarray, disability: np.ndarray) -> tuple[dict, Reasons]:
    """Everything but the adjustment and the CI, for one slice of pairs."""
    nan = float("nan")
    n = int(neutral.size)
    diff = disability - neutral
    why = Reasons()
    row: dict = {
        "n_pairs": n,
        "mean_neutral": float(np.mean(neutral)) if n else nan,
        "mean_disability": float(np.mean(disability)) if n else nan,
        "mean_diff": float(np.mean(diff)) if n else nan,
        "sd_diff": float(np.std(diff, ddof=1)) if n >= 2 else nan,
        "t_stat": nan,
        "t_p": nan,
        "anova_f": nan,
        "anova_p": nan,
        "cohen_dz": nan,
        "cohen_d_pooled": nan,
        "wilcoxon_p": nan,
    }
    if n < 2:
        for stat in ("t_test", "anova", "cohen_dz", "cohen_d_pooled", "wilcoxon"):
            why.add(stat, "n<2")
        return row, why

    # paired t-test and d_z share the sd of the differences
    if is_zero_sd(diff):
        row["sd_diff"] = 0.0
        why.add("t_test", "zero variance of differences")
        why.add("cohen_dz", "zero variance of differences")
    else:
        res, warns, err = quiet_call(stats.ttest_rel, disability, neutral)
        if res is not None:
            row["t_stat"], row["t_p"] = finite(res.statistic), finite(res.pvalue)
        if np.isnan(row["t_p"]):
            why.add("t_test", str(err) if err else (warns[0] if warns else "undefined"))
        row["cohen_dz"] = float(np.mean(diff) / np.std(diff, ddof=1))

    # two-group one-way ANOVA and pooled d need within-group spread
    if is_zero_sd(neutral) and is_zero_sd(disability):
        why.add("anova", "zero variance within both conditions")
        why.add("cohen_d_pooled", "zero variance within both conditions")
    else:
        res, warns, err = quiet_call(stats.f_oneway, neutral, disability)
        if res is not None:
            row["anova_f"], row["anova_p"] = finite(res.statistic), finite(res.pvalue)
        if np.isnan(row["anova_p"]):
            row["anova_f"] = nan  # scipy can return F ~ -1e-32 with p NaN: no F without its p
            why.add("anova", str(err) if err else (warns[0] if warns else "undefined"))
        sd_pooled = np.sqrt((np.var(neutral, ddof=1) + np.var(disability, ddof=1)) / 2.0)
        row["cohen_d_pooled"] = float((np.mean(disability) - np.mean(neutral)) / sd_pooled)

    # Wilcoxon signed-rank: zeros are dropped, so it needs a non-zero difference
    nonzero = np.abs(diff) > 1e-12 * max(1.0, float(np.max(np.abs(diff))))
    if not nonzero.any():
        why.add("wilcoxon", "all differences zero")
    else:
        d = np.where(nonzero, diff, 0.0)  # float dust becomes an exact zero
        if d.size <= WILCOXON_PERMUTATION_MAX_N and (not nonzero.all() or _has_ties(np.abs(d[nonzero]))):
            res, warns, err = None, [], None
            row["wilcoxon_p"] = wilcoxon_exact_permutation_p(d)
        else:
            res, warns, err = quiet_call(stats.wilcoxon, d)
        if res is not None:
            row["wilcoxon_p"] = finite(res.pvalue)
        if np.isnan(row["wilcoxon_p"]):
            why.add("wilcoxon", str(err) if err else (warns[0] if warns else "undefined"))
    return row, why


def _slice_frames(df: pd.DataFrame, slices: Sequence[str]):
    for name in slices:
        if name == "overall":
            yield name, df.assign(slice_value="all")
        elif name == "domain":
            yield name, df.assign(slice_value=df["domain"])
        elif name == "disability":
            yield name, df.assign(slice_value=df["disability_id"])
        elif name == "domain_disability":
            yield name, df.assign(slice_value=df["domain"].astype("str") + "|" + df["disability_id"].astype("str"))
        else:
            raise ValueError(f"unknown slice {name!r}; known: {ALL_SLICES}")


def _adjust(p: pd.Series, method: str) -> pd.Series:
    out = pd.Series(np.nan, index=p.index, dtype="float64")
    ok = p.notna()
    if ok.any():
        out[ok] = multipletests(p[ok].to_numpy(dtype=float), method=method)[1]
    return out


def significance(
    pairs: pd.DataFrame,
    cluster_col: str = "query_id",
    n_boot: int = 2000,
    seed: int = 0,
    slices: Sequence[str] = SLICES,
    level: float = 0.95,
) -> pd.DataFrame:
    """Per (task, model_id, arm, metric, slice, slice_value): paired tests, effect sizes, CI.

    See the module docstring for the columns. Rows whose neutral or disability
    score is missing are dropped; a missing cluster id makes the pair its own cluster.
    The bootstrap of each slice has its own random stream derived from `seed` and
    the slice's key, so results are reproducible and independent of row order.
    """
    require_columns(pairs, PAIR_COLUMNS + [cluster_col], "significance")
    df = pairs.copy()
    df["neutral_score"] = pd.to_numeric(df["neutral_score"], errors="coerce").astype(float)
    df["disability_score"] = pd.to_numeric(df["disability_score"], errors="coerce").astype(float)
    df = df[np.isfinite(df["neutral_score"]) & np.isfinite(df["disability_score"])]
    df = df.reset_index(drop=True)
    cl = df[cluster_col].astype(object)
    own = pd.Series([f"__pair_{i}" for i in range(len(df))], dtype=object)
    df["_cluster"] = cl.where(cl.notna(), own).astype("str")
    # deterministic order: results must not depend on input row order
    df = df.sort_values(GROUP_KEYS + ["_cluster", "domain", "disability_id", "neutral_score", "disability_score"],
                        kind="mergesort").reset_index(drop=True)

    rows = []
    for slice_name, frame in _slice_frames(df, slices):
        for key, g in frame.groupby(GROUP_KEYS + ["slice_value"], sort=True, dropna=False):
            key = group_key_values(key)
            neutral = g["neutral_score"].to_numpy(dtype=float)
            disability = g["disability_score"].to_numpy(dtype=float)
            row, why = _slice_stats(neutral, disability)
            low, high, ci_why = cluster_bootstrap_ci(
                disability - neutral, g["_cluster"].to_numpy(), n_boot=n_boot,
                seed=stable_seed(seed, *key, slice_name), level=level,
            )
            if ci_why:
                why.add("bootstrap_ci", ci_why)
            directions = g["direction"].dropna().unique()
            row.update(
                dict(zip(GROUP_KEYS, key[:4])),
                direction=directions[0] if len(directions) == 1 else None,
                slice=slice_name,
                slice_value=key[4],
                n_clusters=int(g["_cluster"].nunique()),
                ci_low=low,
                ci_high=high,
                reason=why,
            )
            if len(directions) > 1:
                why.add("direction", "conflicting directions in input")
            rows.append(row)

    if not rows:
        return typed_frame([], SIGNIFICANCE_SCHEMA)
    out = pd.DataFrame(rows)
    out["p_holm"] = np.nan
    out["p_bh"] = np.nan
    for _, idx in out.groupby(GROUP_KEYS, sort=False, dropna=False).groups.items():
        out.loc[idx, "p_holm"] = _adjust(out.loc[idx, "t_p"], "holm")
        out.loc[idx, "p_bh"] = _adjust(out.loc[idx, "t_p"], "fdr_bh")
    for i, why in out["reason"].items():
        if np.isnan(out.at[i, "t_p"]):
            why.add("p_holm/p_bh", "no t_p")
        out.at[i, "reason"] = why.text
    return typed_frame(out, SIGNIFICANCE_SCHEMA)


# --------------------------------------------------------------------------- across models


def model_comparison(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, arm, metric): one-way ANOVA of the per-pair differences across models.

    Differences are disability_score - neutral_score (F and p do not depend on
    the sign). NULL F/p with a reason when fewer than 2 models have pairs, when
    there are no more pairs than models (no within-model degrees of freedom), or
    when every model's differences are constant.
    """
    require_columns(pairs, ["task", "model_id", "arm", "metric", "neutral_score", "disability_score"],
                    "model_comparison")
    df = pairs.copy()
    df["diff"] = (pd.to_numeric(df["disability_score"], errors="coerce")
                  - pd.to_numeric(df["neutral_score"], errors="coerce")).astype(float)
    df = df[np.isfinite(df["diff"])]
    rows = []
    for key, g in df.groupby(["task", "arm", "metric"], sort=True, dropna=False):
        key = group_key_values(key)
        groups = {str(m): gg["diff"].to_numpy(dtype=float) for m, gg in g.groupby("model_id", sort=True)}
        n_total = int(sum(v.size for v in groups.values()))
        why = Reasons()
        f = p = float("nan")
        if len(groups) < 2:
            why.add("anova", "fewer than 2 models")
        elif n_total <= len(groups):
            why.add("anova", "no more pairs than models (no within-model variance)")
        elif all(is_zero_sd(v) for v in groups.values()):
            why.add("anova", "zero variance of differences within every model")
        else:
            res, warns, err = quiet_call(stats.f_oneway, *groups.values())
            if res is not None:
                f, p = finite(res.statistic), finite(res.pvalue)
            if np.isnan(p):
                why.add("anova", str(err) if err else (warns[0] if warns else "undefined"))
        rows.append({
            "task": key[0], "arm": key[1], "metric": key[2],
            "k_models": len(groups), "n_pairs": n_total,
            "n_per_model": json.dumps({m: int(v.size) for m, v in groups.items()}, sort_keys=True),
            "mean_diff_per_model": json.dumps({m: float(np.mean(v)) for m, v in groups.items()}, sort_keys=True),
            "anova_f": f, "anova_p": p, "reason": why.text,
        })
    return typed_frame(rows, MODEL_COMPARISON_SCHEMA)
