"""Paired significance of neutral vs disability-aware scores (mart `significance`).

Input, `pairs`: one row per included neutral/disability-aware pair, long format:

    task, model_id, arm, metric, direction, domain, disability_id,
    <cluster_col> (query_id for text, image_id for vision),
    neutral_score, disability_score

`significance()` returns one row per (task, model_id, arm, metric, slice,
slice_value), slices 'overall' (slice_value 'all'), 'domain' and 'disability'
(optionally 'domain_disability', value 'domain|disability'), with the columns of
SIGNIFICANCE_SCHEMA:

    n_pairs, n_clusters      pairs and distinct clusters (queries) in the slice
    mean_neutral, mean_disability, mean_diff, sd_diff
                             mean_diff = mean(disability - neutral); NOT direction
                             adjusted: for a higher_is_better metric a negative
                             mean_diff is a degradation, for lower_is_better a positive one

  The test the slice is judged by (pairs of one query are not independent: in the overall
  and domain slices one neutral answer serves up to nine pairs; see ableaudit.stats.clustered
  and bench/null_simulation.py):
    query_t_stat, query_t_p  one-sample t-test of the per-cluster mean differences against 0
                             (scipy ttest_1samp; n_clusters - 1 degrees of freedom)
    p_holm, p_bh             query_t_p adjusted (statsmodels multipletests 'holm' and
                             'fdr_bh') over all slices of one (task, model_id, arm, metric)
                             that have a query_t_p
    ci_low, ci_high          95% percentile CI of mean_diff from a cluster bootstrap: whole
                             clusters (queries / images) are resampled with replacement,
                             n_boot times; the statistic is the pair-weighted mean difference
    significant              p_holm < alpha AND [ci_low, ci_high] excludes 0 (false when
                             either is missing): never true beside an interval containing 0
    min_detectable_diff      the smallest |mean shift| the query-level test detects at alpha
                             with 80% power, given the spread of the per-query means
                             (statsmodels TTestPower, noncentral t)

  Effect sizes:
    cohen_dz                 mean(diff) / sd(diff, ddof=1)  (= paper_t_stat / sqrt(n))
    cohen_d_pooled           (mean_disability - mean_neutral) / sqrt((sd_n^2 + sd_d^2) / 2),
                             sds with ddof=1: the classical pooled-SD Cohen's d for two equal
                             groups (= Lakens' d_av with root-mean-square SD); ignores pairing;
                             exactly 0 when the means are equal
    wasserstein_distance     Wasserstein-1 distance between the neutral and the disability-aware
                             scores as two distributions (scipy.stats.wasserstein_distance;
                             ignores pairing). For a pair metric `<sentiment>_parity_strict`
                             it is LangFair's strict counterfactual sentiment parity

  The papers' tests, on pairs taken as independent (to reproduce their tables; they
  overstate the evidence wherever pairs share a query):
    paper_t_stat, paper_t_p  scipy.stats.ttest_rel(disability, neutral), two-sided; the
                             sign of t is the sign of mean_diff. (AccessEval Table 7 reports
                             ttest_rel(NQ, DQ): the same p, t with the opposite sign.)
    paper_anova_f, paper_anova_p
                             one-way ANOVA of the two conditions as two independent groups,
                             as the vision paper reports (it ignores the pairing too).
                             Degenerate cases are decided before scipy.stats.f_oneway
                             (oneway_anova): equal group means with some spread give exactly
                             F = 0, p = 1; no spread within either group gives NULL (F's
                             denominator is 0) with a reason; F is never negative
    pair_wilcoxon_p          scipy.stats.wilcoxon(diff) over pairs, two-sided, zero
                             differences dropped (zero_method='wilcox'), the method scipy's
                             'auto' picks
    pair_wilcoxon_method     which: 'exact' (exact null distribution, n <= 50 without zeros or
                             ties), 'exact_permutation' (all 2^n sign flips, n <= 13 with zeros
                             or ties; computed here vectorised, same p), 'normal_approx' (else)
    reason                   why any statistic above is NULL ('paper_t_test: n<2; ...'),
                             else NULL

`model_comparison()` returns one row per (task, arm, metric): a one-way ANOVA of the
per-pair differences across models (MODEL_COMPARISON_SCHEMA), with the same
degenerate-case rules (models with identical differences: F = 0, p = 1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ableaudit.stats._common import (
    REL_ZERO,
    Reasons,
    finite,
    group_key_values,
    is_zero_sd,
    quiet_call,
    require_columns,
    stable_seed,
    typed_frame,
)
from ableaudit.stats.clustered import (
    cluster_means,
    detectable_diff_of_means,
    is_significant,
    t_test_of_means,
)

GROUP_KEYS = ["task", "model_id", "arm", "metric"]
SLICES = ("overall", "domain", "disability")
ALL_SLICES = ("overall", "domain", "disability", "domain_disability")

PAIR_COLUMNS = GROUP_KEYS + [
    "direction",
    "domain",
    "disability_id",
    "neutral_score",
    "disability_score",
]

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
    "query_t_stat": "float64",
    "query_t_p": "float64",
    "p_holm": "float64",
    "p_bh": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "significant": "bool",
    "min_detectable_diff": "float64",
    "cohen_dz": "float64",
    "cohen_d_pooled": "float64",
    "wasserstein_distance": "float64",
    "paper_t_stat": "float64",
    "paper_t_p": "float64",
    "paper_anova_f": "float64",
    "paper_anova_p": "float64",
    "pair_wilcoxon_p": "float64",
    "pair_wilcoxon_method": "str",
    "reason": "str",
}

MODEL_COMPARISON_SCHEMA: dict[str, str] = {
    "task": "str",
    "arm": "str",
    "metric": "str",
    "k_models": "int64",
    "n_pairs": "int64",
    "n_per_model": "str",  # JSON object {model_id: n pairs}
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


WILCOXON_EXACT_MAX_N = 50  # scipy's exact null distribution (no ties, no zeros) up to here
WILCOXON_EXACT = "exact"
WILCOXON_PERMUTATION = "exact_permutation"
WILCOXON_NORMAL = "normal_approx"


def _has_ties(x: np.ndarray) -> bool:
    return len(np.unique(x)) < len(x)


def wilcoxon_method(d: np.ndarray) -> str:
    """The p-value method for differences `d` (zeros exact), as scipy.stats.wilcoxon's 'auto' picks it:
    the exact null distribution for n <= 50 without zeros or ties, the exact sign-flip
    permutation test for n <= 13 with them, the normal approximation otherwise."""
    d = np.asarray(d, dtype=float)
    zeros_or_ties = bool((d == 0).any()) or _has_ties(np.abs(d[d != 0]))
    if not zeros_or_ties and d.size <= WILCOXON_EXACT_MAX_N:
        return WILCOXON_EXACT
    if zeros_or_ties and d.size <= WILCOXON_PERMUTATION_MAX_N:
        return WILCOXON_PERMUTATION
    return WILCOXON_NORMAL


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


# --------------------------------------------------------------------------- ANOVA

ZERO_WITHIN = "zero variance within every group (F undefined: its denominator is 0)"


def _exact_mean(v: np.ndarray) -> float:
    # math.fsum is correctly rounded: the same values in any order give the same mean
    return math.fsum(v.tolist()) / v.size


def equal_means(groups: Sequence[np.ndarray]) -> bool:
    """True when the group means are equal up to rounding (no between-group variance)."""
    means = [_exact_mean(g) for g in groups]
    scale = max(1.0, max(float(np.max(np.abs(g))) for g in groups))
    return max(means) - min(means) <= REL_ZERO * scale


def oneway_anova(groups: Sequence[np.ndarray]) -> tuple[float, float, str | None]:
    """(F, p, reason) of a one-way ANOVA, with the degenerate cases decided before scipy.

    F is between-group variance over within-group variance. When every group is
    constant the denominator is 0 and F is undefined whatever the means (0/0 or
    c/0): NaN with ZERO_WITHIN. When the group means are equal and some group
    varies, F is exactly 0 and p exactly 1. Only the rest goes to
    scipy.stats.f_oneway, whose F is then clipped at 0 (a negative F is rounding
    of a between-group sum of squares that is 0 on paper, and then p is 1).
    The caller checks that there are at least two groups and more values than groups.
    """
    nan = float("nan")
    groups = [np.asarray(g, dtype=float) for g in groups]
    if all(is_zero_sd(g) for g in groups):
        return nan, nan, ZERO_WITHIN
    if equal_means(groups):
        return 0.0, 1.0, None
    res, warns, err = quiet_call(stats.f_oneway, *groups)
    f, p = (finite(res.statistic), finite(res.pvalue)) if res is not None else (nan, nan)
    if not np.isnan(f) and f <= 0.0:
        return 0.0, 1.0, None
    if np.isnan(f) or np.isnan(p):
        return nan, nan, str(err) if err else (warns[0] if warns else "undefined")
    return f, p, None


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
        "wasserstein_distance": float(stats.wasserstein_distance(neutral, disability))
        if n
        else nan,
        "paper_t_stat": nan,
        "paper_t_p": nan,
        "paper_anova_f": nan,
        "paper_anova_p": nan,
        "cohen_dz": nan,
        "cohen_d_pooled": nan,
        "pair_wilcoxon_p": nan,
        "pair_wilcoxon_method": None,
    }
    if n < 2:
        for stat in ("paper_t_test", "paper_anova", "cohen_dz", "cohen_d_pooled", "pair_wilcoxon"):
            why.add(stat, "n<2")
        return row, why

    # paired t-test and d_z share the sd of the differences
    if is_zero_sd(diff):
        row["sd_diff"] = 0.0
        why.add("paper_t_test", "zero variance of differences")
        why.add("cohen_dz", "zero variance of differences")
    else:
        res, warns, err = quiet_call(stats.ttest_rel, disability, neutral)
        if res is not None:
            row["paper_t_stat"], row["paper_t_p"] = finite(res.statistic), finite(res.pvalue)
        if np.isnan(row["paper_t_p"]):
            why.add("paper_t_test", str(err) if err else (warns[0] if warns else "undefined"))
        row["cohen_dz"] = float(np.mean(diff) / np.std(diff, ddof=1))

    # two-group one-way ANOVA (degenerate cases decided by oneway_anova) and pooled d
    row["paper_anova_f"], row["paper_anova_p"], anova_why = oneway_anova([neutral, disability])
    if anova_why:
        why.add("paper_anova", anova_why)
    if all(is_zero_sd(v) for v in (neutral, disability)):
        why.add("cohen_d_pooled", "zero variance within both conditions (no pooled sd)")
    elif equal_means([neutral, disability]):
        row["cohen_d_pooled"] = 0.0
    else:
        sd_pooled = np.sqrt((np.var(neutral, ddof=1) + np.var(disability, ddof=1)) / 2.0)
        row["cohen_d_pooled"] = float((np.mean(disability) - np.mean(neutral)) / sd_pooled)

    # Wilcoxon signed-rank: zeros are dropped, so it needs a non-zero difference
    nonzero = np.abs(diff) > 1e-12 * max(1.0, float(np.max(np.abs(diff))))
    if not nonzero.any():
        why.add("pair_wilcoxon", "all differences zero")
    else:
        d = np.where(nonzero, diff, 0.0)  # float dust becomes an exact zero
        method = wilcoxon_method(d)
        res, warns, err = None, [], None
        if method == WILCOXON_PERMUTATION:
            row["pair_wilcoxon_p"] = wilcoxon_exact_permutation_p(d)
        else:
            res, warns, err = quiet_call(
                stats.wilcoxon, d, method="exact" if method == WILCOXON_EXACT else "asymptotic"
            )
        if res is not None:
            row["pair_wilcoxon_p"] = finite(res.pvalue)
        if np.isnan(row["pair_wilcoxon_p"]):
            why.add("pair_wilcoxon", str(err) if err else (warns[0] if warns else "undefined"))
        else:
            row["pair_wilcoxon_method"] = method
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
            yield (
                name,
                df.assign(
                    slice_value=df["domain"].astype("str") + "|" + df["disability_id"].astype("str")
                ),
            )
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
    df = df.sort_values(
        GROUP_KEYS + ["_cluster", "domain", "disability_id", "neutral_score", "disability_score"],
        kind="mergesort",
    ).reset_index(drop=True)

    rows = []
    for slice_name, frame in _slice_frames(df, slices):
        for key, g in frame.groupby(GROUP_KEYS + ["slice_value"], sort=True, dropna=False):
            key = group_key_values(key)
            neutral = g["neutral_score"].to_numpy(dtype=float)
            disability = g["disability_score"].to_numpy(dtype=float)
            row, why = _slice_stats(neutral, disability)
            low, high, ci_why = cluster_bootstrap_ci(
                disability - neutral,
                g["_cluster"].to_numpy(),
                n_boot=n_boot,
                seed=stable_seed(seed, *key, slice_name),
                level=level,
            )
            if ci_why:
                why.add("bootstrap_ci", ci_why)
            means = cluster_means(disability - neutral, g["_cluster"].to_numpy())
            row["query_t_stat"], row["query_t_p"], t_why = t_test_of_means(means)
            if t_why:
                why.add("query_t_test", t_why)
            row["min_detectable_diff"], mde_why = detectable_diff_of_means(means, 1.0 - level)
            if mde_why:
                why.add("min_detectable_diff", mde_why)
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
        out.loc[idx, "p_holm"] = _adjust(out.loc[idx, "query_t_p"], "holm")
        out.loc[idx, "p_bh"] = _adjust(out.loc[idx, "query_t_p"], "fdr_bh")
    out["significant"] = [
        is_significant(p, low, high, alpha=1.0 - level)
        for p, low, high in zip(out["p_holm"], out["ci_low"], out["ci_high"], strict=True)
    ]
    for i, why in out["reason"].items():
        if np.isnan(out.at[i, "query_t_p"]):
            why.add("p_holm/p_bh", "no query_t_p")
        out.at[i, "reason"] = why.text
    return typed_frame(out, SIGNIFICANCE_SCHEMA)


# --------------------------------------------------------------------------- across models


MODEL_DIFF_KEYS = ["task", "arm", "metric", "model_id"]
"""The keys of ``model_diffs``: one row per model of a (task, arm, metric)."""


def model_diffs_sql(keys: Sequence[str] = ()) -> str:
    """``model_diffs`` as DuckDB SQL over a relation of pairs named ``pairs``, with ``keys`` as
    further leading keys: a mart reads a few hundred rows of arrays where it would read millions
    of pairs. Filter out the pairs that should not count (``included`` false) before."""
    listed = ", ".join([*keys, *MODEL_DIFF_KEYS])
    return (
        f"select {listed}, list(diff order by diff) as diffs "
        "from (select *, disability_score - neutral_score as diff from pairs) "
        f"where isfinite(diff) and model_id is not null group by {listed}"
    )


def model_diffs(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, arm, metric, model_id): the model's finite per-pair differences
    (disability_score - neutral_score), ascending, as one array (column ``diffs``); pairs of
    no model are left out. ``model_diffs_sql`` computes the same rows in DuckDB."""
    require_columns(
        pairs,
        ["task", "model_id", "arm", "metric", "neutral_score", "disability_score"],
        "model_comparison",
    )
    df = pairs[["task", "arm", "metric", "model_id"]].copy()
    df["diff"] = (
        pd.to_numeric(pairs["disability_score"], errors="coerce")
        - pd.to_numeric(pairs["neutral_score"], errors="coerce")
    ).astype(float)
    df = df[np.isfinite(df["diff"]) & df["model_id"].notna()]
    rows = [
        (*group_key_values(key), np.sort(g["diff"].to_numpy(dtype=float), kind="mergesort"))
        for key, g in df.groupby(MODEL_DIFF_KEYS, sort=False, dropna=False)
    ]
    return pd.DataFrame(rows, columns=[*MODEL_DIFF_KEYS, "diffs"])


def model_comparison(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, arm, metric): one-way ANOVA of the per-pair differences across models.

    Differences are disability_score - neutral_score (F and p do not depend on
    the sign). NULL F/p with a reason when fewer than 2 models have pairs, when
    there are no more pairs than models (no within-model degrees of freedom), or
    when every model's differences are constant; F = 0 and p = 1 when the models'
    mean differences are equal (e.g. one checkpoint audited under two names).
    """
    return model_comparison_of_diffs(model_diffs(pairs))


def model_comparison_of_diffs(diffs: pd.DataFrame) -> pd.DataFrame:
    """``model_comparison`` from the rows of ``model_diffs`` (or of ``model_diffs_sql``).

    Each model's differences are summed in ascending order, so every value, the means
    written out as text included, is the same whatever order the pairs were read in.
    """
    require_columns(diffs, [*MODEL_DIFF_KEYS, "diffs"], "model_comparison")
    rows = []
    ordered = diffs.assign(model_id=diffs["model_id"].astype(str)).sort_values(
        MODEL_DIFF_KEYS, kind="mergesort"
    )
    for key, g in ordered.groupby(["task", "arm", "metric"], sort=True, dropna=False):
        key = group_key_values(key)
        groups = {
            m: np.asarray(v, dtype=float)
            for m, v in zip(g["model_id"], g["diffs"], strict=True)
            if len(v)
        }
        n_total = int(sum(v.size for v in groups.values()))
        why = Reasons()
        f = p = float("nan")
        if len(groups) < 2:
            why.add("anova", "fewer than 2 models")
        elif n_total <= len(groups):
            why.add("anova", "no more pairs than models (no within-model variance)")
        else:
            f, p, anova_why = oneway_anova(list(groups.values()))
            if anova_why:
                why.add("anova", anova_why)
        rows.append(
            {
                "task": key[0],
                "arm": key[1],
                "metric": key[2],
                "k_models": len(groups),
                "n_pairs": n_total,
                "n_per_model": json.dumps(
                    {m: int(v.size) for m, v in groups.items()}, sort_keys=True
                ),
                "mean_diff_per_model": json.dumps(
                    {m: float(np.mean(v)) for m, v in groups.items()}, sort_keys=True
                ),
                "anova_f": f,
                "anova_p": p,
                "reason": why.text,
            }
        )
    return typed_frame(rows, MODEL_COMPARISON_SCHEMA)
