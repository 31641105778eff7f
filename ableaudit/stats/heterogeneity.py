"""Do the degradation rates differ across disability categories, or across domains? (mart
`heterogeneity`)

Input, `pairs`: one row per included pair, long format:

    task, model_id, arm, metric, domain, disability_id, query_id, neutral_generation_id, degraded

`heterogeneity()` returns one row per (task, model_id, arm, metric, factor), factor
'disability' or 'domain', with the columns of HETEROGENEITY_SCHEMA:

    k_levels, n_pairs, n_clusters   categories (or domains) with pairs, pairs, queries
    test                    'cochrans_q' for disability: every neutral answer is a block that
                            holds one binary outcome per category (the nine disability-aware
                            answers paired with it); blocks that lack a category are left out
                            (n_blocks says how many count). statsmodels cochrans_q.
                            'anova_of_query_rates' for domain: a query belongs to one domain,
                            so the domains are independent groups of queries; a one-way ANOVA
                            of the per-query degradation rates (each query counts once)
    statistic, df, p_value  of that test; NULL with a reason when undefined
    n_blocks                blocks of the Cochran test (NULL for domain)
    worst_level, worst_pct, best_level, best_pct
                            the level with the highest degradation rate (%) and, of the
                            others, the one with the lowest (ties broken by name: two
                            distinct levels, also when every rate is the same), and their rates
    gap_pct                 worst_pct - best_pct, in percentage points
    gap_ci_low, gap_ci_high 95% percentile interval of the gap between those two named levels,
                            resampling whole queries (within each domain for factor domain):
                            the interval of this pair's gap, not of the largest gap of a
                            fresh sample
    min_detectable_gap_pct  the smallest gap between those two levels, in percentage points,
                            that a t-test with the query as its unit detects at alpha 0.05 with
                            80% power, taking the observed spread as the truth: for disability
                            the paired t-test of the per-query differences worst - best (each
                            query's rates of the two categories; statsmodels TTestPower), for
                            domain the two-sample t-test of the per-query rates of the two
                            domains (statsmodels TTestIndPower, pooled sd)
    n_gap_queries           the queries that test counts: with both categories (disability),
                            in either domain (domain)
    reason                  why a statistic is NULL, else NULL
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.stats.contingency_tables import cochrans_q
from statsmodels.stats.power import TTestIndPower

from ableaudit.stats._common import (
    Reasons,
    finite,
    group_key_values,
    quiet_call,
    require_columns,
    stable_seed,
    typed_frame,
)
from ableaudit.stats.clustered import ALPHA, POWER, detectable_diff_of_means
from ableaudit.stats.paired import oneway_anova

GROUP_KEYS = ["task", "model_id", "arm", "metric"]
FACTORS = {"disability": "disability_id", "domain": "domain"}
PAIR_COLUMNS = GROUP_KEYS + [
    "domain",
    "disability_id",
    "query_id",
    "neutral_generation_id",
    "degraded",
]

HETEROGENEITY_SCHEMA: dict[str, str] = {
    "task": "str",
    "model_id": "str",
    "arm": "str",
    "metric": "str",
    "factor": "str",
    "k_levels": "int64",
    "n_pairs": "int64",
    "n_clusters": "int64",
    "test": "str",
    "statistic": "float64",
    "df": "float64",
    "p_value": "float64",
    "n_blocks": "float64",
    "worst_level": "str",
    "worst_pct": "float64",
    "best_level": "str",
    "best_pct": "float64",
    "gap_pct": "float64",
    "gap_ci_low": "float64",
    "gap_ci_high": "float64",
    "min_detectable_gap_pct": "float64",
    "n_gap_queries": "float64",
    "reason": "str",
}


def cochran_blocks(g: pd.DataFrame, level_col: str) -> pd.DataFrame:
    """Blocks (neutral answers) x levels of 0/1 outcomes, complete blocks only."""
    table = g.pivot_table(
        index="neutral_generation_id", columns=level_col, values="degraded", aggfunc="max"
    )
    return table.dropna(axis=0, how="any").astype(int)


def _cochran(g: pd.DataFrame, why: Reasons) -> dict:
    out = {"test": "cochrans_q", "statistic": np.nan, "df": np.nan, "p_value": np.nan}
    blocks = cochran_blocks(g, "disability_id")
    out["n_blocks"] = float(len(blocks))
    if len(blocks) < 2:
        why.add("cochrans_q", "fewer than 2 neutral answers with every category")
    elif blocks.to_numpy().min() == blocks.to_numpy().max():
        why.add("cochrans_q", "every outcome the same (no category differs)")
    elif blocks.nunique(axis=1).max() == 1:
        why.add(
            "cochrans_q",
            "every neutral answer has one outcome in all categories (Q undefined: its denominator is 0)",
        )
    else:
        res, warns, err = quiet_call(cochrans_q, blocks.to_numpy())
        if res is not None:
            out.update(
                statistic=finite(res.statistic), df=float(res.df), p_value=finite(res.pvalue)
            )
        if np.isnan(out["p_value"]):
            why.add("cochrans_q", str(err) if err else (warns[0] if warns else "undefined"))
    return out


def _query_rate_anova(g: pd.DataFrame, why: Reasons) -> dict:
    out = {"test": "anova_of_query_rates", "statistic": np.nan, "df": np.nan, "p_value": np.nan}
    rates = g.groupby(["domain", "query_id"], sort=True).degraded.mean()
    groups = [v.to_numpy(dtype=float) for _, v in rates.groupby(level="domain", sort=True)]
    if len(groups) < 2:
        why.add("anova_of_query_rates", "fewer than 2 domains")
    elif len(rates) <= len(groups):
        why.add("anova_of_query_rates", "no more queries than domains")
    else:
        out["statistic"], out["p_value"], anova_why = oneway_anova(groups)
        out["df"] = float(len(groups) - 1)
        if anova_why:
            why.add("anova_of_query_rates", anova_why)
    return out


def _gap_ci(
    g: pd.DataFrame,
    level_col: str,
    worst: str,
    best: str,
    strata_col: str | None,
    n_boot: int,
    seed: np.random.SeedSequence,
    level: float,
) -> tuple[float, float, str | None]:
    """Percentile interval of rate(worst) - rate(best), whole queries resampled (within strata)."""
    nan = float("nan")
    q = g.assign(
        w=(g[level_col] == worst).astype(float), b=(g[level_col] == best).astype(float)
    ).assign(wd=lambda f: f.w * f.degraded, bd=lambda f: f.b * f.degraded)
    per_query = q.groupby("query_id", sort=True)[["w", "b", "wd", "bd"]].sum()
    strata = (
        g.groupby("query_id", sort=True)[strata_col].first()
        if strata_col
        else pd.Series("all", index=per_query.index)
    )
    if len(per_query) < 2:
        return nan, nan, "fewer than 2 queries"
    rng = np.random.default_rng(seed)
    values = per_query.to_numpy(dtype=float)
    totals = np.zeros((n_boot, 4))
    for _, members in strata.groupby(strata, sort=True).groups.items():
        idx = per_query.index.get_indexer(members)
        draw = idx[rng.integers(0, len(idx), size=(n_boot, len(idx)))]
        totals += values[draw].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        gaps = 100.0 * (totals[:, 2] / totals[:, 0] - totals[:, 3] / totals[:, 1])
    if not np.isfinite(gaps).all():
        return nan, nan, "a resample lacks one of the two levels"
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(gaps, [alpha, 1.0 - alpha])
    return float(low), float(high), None


def _detectable_gap(
    g: pd.DataFrame, level_col: str, worst: str, best: str, paired: bool
) -> tuple[float, float, str | None]:
    """(min detectable gap in points, queries counted, reason) between the two named levels."""
    nan = float("nan")
    rates = (
        g[g[level_col].isin([worst, best])]
        .groupby(["query_id", level_col], sort=True)
        .degraded.mean()
        .unstack(level_col)
    )
    if paired:
        diffs = (rates[worst] - rates[best]).dropna().to_numpy(dtype=float)
        mde, why = detectable_diff_of_means(diffs, ALPHA, POWER)
        return 100.0 * mde, float(diffs.size), why
    a, b = rates[worst].dropna().to_numpy(dtype=float), rates[best].dropna().to_numpy(dtype=float)
    n = float(a.size + b.size)
    if a.size + b.size < 3:
        return nan, n, "fewer than 3 queries in the two domains"
    pooled = np.sqrt(
        (
            (a.size - 1) * (a.var(ddof=1) if a.size > 1 else 0.0)
            + (b.size - 1) * (b.var(ddof=1) if b.size > 1 else 0.0)
        )
        / (a.size + b.size - 2)
    )
    if not pooled > 0:
        return nan, n, "zero variance of the per-query rates in the two domains"
    effect, _, err = quiet_call(
        TTestIndPower().solve_power,
        effect_size=None,
        nobs1=a.size,
        ratio=b.size / a.size,
        alpha=ALPHA,
        power=POWER,
        alternative="two-sided",
    )
    effect = finite(np.asarray(effect).item()) if effect is not None else nan
    if np.isnan(effect):
        return nan, n, str(err) if err else f"no effect size reaches power {POWER:g}"
    return 100.0 * effect * float(pooled), n, None


def heterogeneity(
    pairs: pd.DataFrame, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """Per (task, model_id, arm, metric, factor): the test that the levels' degradation rates are
    equal, the worst and best level and the gap between them with its query-cluster interval.
    See the module docstring for the columns."""
    require_columns(pairs, PAIR_COLUMNS, "heterogeneity")
    df = pairs[pairs["degraded"].notna()].copy()
    df["degraded"] = df["degraded"].astype(int)
    for col in ("domain", "disability_id", "query_id", "neutral_generation_id"):
        df[col] = df[col].astype(str)
    rows = []
    for key, g in df.groupby(GROUP_KEYS, sort=True, dropna=False):
        key = group_key_values(key)
        for factor, level_col in FACTORS.items():
            why = Reasons()
            rates = 100.0 * g.groupby(level_col, sort=True).degraded.mean()
            row = dict(zip(GROUP_KEYS, key), factor=factor, k_levels=len(rates))
            row.update(n_pairs=len(g), n_clusters=g.query_id.nunique())
            row.update(_cochran(g, why) if factor == "disability" else _query_rate_anova(g, why))
            if len(rates) < 2:
                why.add("gap", f"fewer than 2 {factor} levels")
                rows.append({**row, "reason": why.text})
                continue
            by_name = rates.sort_index()
            worst = by_name.sort_values(ascending=False, kind="mergesort").index[0]
            # the best of the other levels: two levels, also when every rate is the same
            best = by_name.drop(worst).sort_values(kind="mergesort").index[0]
            low, high, ci_why = _gap_ci(
                g,
                level_col,
                worst,
                best,
                "domain" if factor == "domain" else None,
                n_boot,
                stable_seed(seed, *key, factor),
                level,
            )
            if ci_why:
                why.add("gap_ci", ci_why)
            mde, n_gap, mde_why = _detectable_gap(
                g, level_col, worst, best, paired=factor == "disability"
            )
            if mde_why:
                why.add("min_detectable_gap", mde_why)
            row.update(
                worst_level=worst,
                worst_pct=float(rates[worst]),
                best_level=best,
                best_pct=float(rates[best]),
                gap_pct=float(rates[worst] - rates[best]),
                gap_ci_low=low,
                gap_ci_high=high,
                min_detectable_gap_pct=mde,
                n_gap_queries=n_gap,
                reason=why.text,
            )
            rows.append(row)
    return typed_frame(rows, HETEROGENEITY_SCHEMA)
