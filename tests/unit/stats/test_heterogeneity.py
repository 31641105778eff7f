"""ableaudit.stats.heterogeneity against statsmodels' Cochran's Q, scipy's ANOVA and a bootstrap
written here."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import cochrans_q

from ableaudit.stats.heterogeneity import HETEROGENEITY_SCHEMA, heterogeneity

CATEGORIES = ["vision", "hearing", "speech", "mobility", "learning"]
DOMAINS = ["education", "finance", "health"]


def make_pairs(seed: int = 0, queries: int = 18, rates=(0.1, 0.2, 0.3, 0.5, 0.6)) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(queries):
        for s in range(2):  # two samples per query: two neutral answers
            for c, rate in zip(CATEGORIES, rates, strict=True):
                rows.append(
                    dict(
                        task="text",
                        model_id="m",
                        arm="baseline",
                        metric="vader",
                        domain=DOMAINS[q % 3],
                        disability_id=c,
                        query_id=f"q{q:02d}",
                        neutral_generation_id=f"g{q}-{s}",
                        degraded=bool(rng.random() < rate + 0.15 * (q % 3)),
                    )
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def pairs():
    return make_pairs()


@pytest.fixture(scope="module")
def het(pairs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return heterogeneity(pairs, n_boot=4000, seed=2)


def test_schema(het):
    assert list(het.columns) == list(HETEROGENEITY_SCHEMA)
    assert dict(het.dtypes.astype(str)) == HETEROGENEITY_SCHEMA
    assert sorted(het.factor) == ["disability", "domain"] and het.reason.isna().all()


def test_categories_by_statsmodels_cochrans_q_on_the_neutral_answer_blocks(het, pairs):
    row = het[het.factor == "disability"].iloc[0]
    table = pairs.pivot(index="neutral_generation_id", columns="disability_id", values="degraded")
    res = cochrans_q(table.to_numpy().astype(int))
    assert row.test == "cochrans_q" and row.n_blocks == 36 and row.k_levels == 5
    assert row.statistic == pytest.approx(res.statistic, rel=1e-12)
    assert row.p_value == pytest.approx(res.pvalue, rel=1e-12) and row.df == 4


def test_domains_by_scipy_anova_of_per_query_rates(het, pairs):
    row = het[het.factor == "domain"].iloc[0]
    rates = pairs.groupby(["domain", "query_id"]).degraded.mean()
    f = stats.f_oneway(*[rates[d].to_numpy() for d in DOMAINS])
    assert row.test == "anova_of_query_rates" and row.df == 2 and np.isnan(row.n_blocks)
    assert row.statistic == pytest.approx(f.statistic, rel=1e-12)
    assert row.p_value == pytest.approx(f.pvalue, rel=1e-12)


def _bootstrap_gap(pairs, col, worst, best, strata, reps=800, seed=9):
    rng = np.random.default_rng(seed)
    by_query = {q: g for q, g in pairs.groupby("query_id")}
    groups = (
        pairs.groupby(strata).query_id.unique() if strata else pd.Series([pairs.query_id.unique()])
    )
    gaps = []
    for _ in range(reps):
        drawn = pd.concat(
            [by_query[q] for ids in groups for q in rng.choice(ids, size=len(ids), replace=True)]
        )
        rate = drawn.groupby(col).degraded.mean()
        gaps.append(100 * (rate[worst] - rate[best]))
    return np.quantile(gaps, [0.025, 0.975])


@pytest.mark.parametrize(
    "factor, col, strata", [("disability", "disability_id", None), ("domain", "domain", "domain")]
)
def test_worst_best_gap_and_its_query_cluster_interval(het, pairs, factor, col, strata):
    row = het[het.factor == factor].iloc[0]
    rates = 100 * pairs.groupby(col).degraded.mean()
    assert row.worst_level == rates.idxmax() and row.best_level == rates.idxmin()
    assert row.worst_pct == pytest.approx(rates.max()) and row.best_pct == pytest.approx(
        rates.min()
    )
    assert row.gap_pct == pytest.approx(rates.max() - rates.min())
    low, high = _bootstrap_gap(pairs, col, row.worst_level, row.best_level, strata)
    # two independent bootstraps of the same quantity agree to a few points
    assert row.gap_ci_low == pytest.approx(low, abs=4.0) and row.gap_ci_high == pytest.approx(
        high, abs=4.0
    )
    assert row.gap_ci_low <= row.gap_pct <= row.gap_ci_high


def test_degenerate_inputs_have_reasons():
    flat = make_pairs(rates=(0.0,) * 5).assign(degraded=False)
    out = heterogeneity(flat, n_boot=50).set_index("factor")
    assert np.isnan(out.loc["disability", "p_value"])
    assert "every outcome the same" in out.loc["disability", "reason"]
    assert out.loc["domain", "statistic"] != out.loc["domain", "statistic"]  # NaN: no spread
    assert out.loc["disability", "gap_pct"] == 0.0
    # every rate the same: still two levels, the first two by name
    assert (out.loc["disability", "worst_level"], out.loc["disability", "best_level"]) == (
        "hearing",
        "learning",
    )
    # each neutral answer: all categories degraded or none; Q's denominator is 0
    split = make_pairs().assign(degraded=lambda f: f.neutral_generation_id.str.endswith("-0"))
    r = heterogeneity(split, n_boot=50).set_index("factor").loc["disability"]
    assert np.isnan(r.statistic) and "Q undefined: its denominator is 0" in r.reason
    one = make_pairs()
    one = one[one.disability_id == "vision"]
    r = heterogeneity(one, n_boot=50).set_index("factor").loc["disability"]
    assert r.k_levels == 1 and np.isnan(r.gap_pct) and "fewer than 2 disability levels" in r.reason
    with pytest.raises(ValueError, match="neutral_generation_id"):
        heterogeneity(one.drop(columns="neutral_generation_id"))


def _power_one_sample(effect: float, n: int) -> float:
    """scipy's noncentral t: power of the two-sided one-sample t-test at alpha 0.05."""
    df, nc = n - 1, effect * np.sqrt(n)
    crit = stats.t.ppf(0.975, df)
    return stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)


def _power_two_sample(effect: float, n1: int, n2: int) -> float:
    df, nc = n1 + n2 - 2, effect * np.sqrt(n1 * n2 / (n1 + n2))
    crit = stats.t.ppf(0.975, df)
    return stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)


def test_min_detectable_gap_has_80_percent_power_by_scipys_noncentral_t(het, pairs):
    cat = het[het.factor == "disability"].iloc[0]
    rates = pairs.groupby(["query_id", "disability_id"]).degraded.mean().unstack()
    diffs = (rates[cat.worst_level] - rates[cat.best_level]).to_numpy()
    assert cat.n_gap_queries == len(diffs) == 18
    effect = cat.min_detectable_gap_pct / 100 / diffs.std(ddof=1)
    assert _power_one_sample(effect, len(diffs)) == pytest.approx(0.80, abs=1e-4)

    dom = het[het.factor == "domain"].iloc[0]
    per_query = pairs.groupby(["domain", "query_id"]).degraded.mean()
    a, b = per_query[dom.worst_level].to_numpy(), per_query[dom.best_level].to_numpy()
    assert dom.n_gap_queries == len(a) + len(b) == 12
    pooled = np.sqrt(
        ((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2)
    )
    effect = dom.min_detectable_gap_pct / 100 / pooled
    assert _power_two_sample(effect, len(a), len(b)) == pytest.approx(0.80, abs=1e-4)
    # more queries, smaller detectable gap
    more = heterogeneity(make_pairs(queries=72), n_boot=50).set_index("factor")
    assert more.loc["disability", "min_detectable_gap_pct"] < cat.min_detectable_gap_pct


def test_min_detectable_gap_needs_spread():
    flat = make_pairs().assign(degraded=True)
    out = heterogeneity(flat, n_boot=50).set_index("factor")
    for factor in ("disability", "domain"):
        assert np.isnan(out.loc[factor, "min_detectable_gap_pct"])
        assert "min_detectable_gap" in out.loc[factor, "reason"]
