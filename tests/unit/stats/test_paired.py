"""ableaudit.stats.paired against scipy/statsmodels called directly, and hand computations."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.weightstats import DescrStatsW

from ableaudit.stats.paired import (
    MODEL_COMPARISON_SCHEMA,
    SIGNIFICANCE_SCHEMA,
    cluster_bootstrap_ci,
    model_comparison,
    model_comparison_of_diffs,
    model_diffs_sql,
    significance,
)

KEYS = ["task", "model_id", "arm", "metric"]


def make_pairs(seed: int = 0, models=("m1", "m2"), n_queries: int = 15) -> pd.DataFrame:
    """Pairs with ties: judge-like integer scores (many tied |diffs| and zero diffs)."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in models:
        for q in range(n_queries):
            dom = ["education", "finance", "health"][q % 3]
            base = int(rng.integers(4, 9))
            for dis in ["vision", "hearing", "speech", "mobility"]:
                rows.append(
                    dict(
                        task="text",
                        model_id=m,
                        arm="baseline",
                        metric="judge_score",
                        direction="higher_is_better",
                        domain=dom,
                        disability_id=dis,
                        query_id=f"q{q}",
                        neutral_score=float(base),
                        disability_score=float(base + rng.integers(-3, 2)),
                    )
                )
    return pd.DataFrame(rows)


def _subset(pairs: pd.DataFrame, row) -> pd.DataFrame:
    g = pairs[(pairs[KEYS] == [row.task, row.model_id, row.arm, row.metric]).all(axis=1)]
    if row.slice == "domain":
        g = g[g.domain == row.slice_value]
    elif row.slice == "disability":
        g = g[g.disability_id == row.slice_value]
    return g


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    return make_pairs()


@pytest.fixture(scope="module")
def sig(pairs) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no stray warning may escape
        return significance(pairs, n_boot=200, seed=1)


def test_schema_and_slices(sig, pairs):
    assert dict(sig.dtypes.astype(str)) == SIGNIFICANCE_SCHEMA
    assert list(sig.columns) == list(SIGNIFICANCE_SCHEMA)
    # 2 models x (1 overall + 3 domains + 4 disabilities)
    assert len(sig) == 2 * (1 + 3 + 4)
    assert set(sig.loc[sig.slice == "overall", "slice_value"]) == {"all"}
    assert (sig.loc[sig.slice == "overall", "n_pairs"] == 60).all()
    assert (sig.loc[sig.slice == "overall", "n_clusters"] == 15).all()
    assert (sig.loc[sig.slice == "domain", "n_clusters"] == 5).all()
    assert (sig.loc[sig.slice == "disability", "n_clusters"] == 15).all()


def test_every_statistic_matches_scipy_called_directly(sig, pairs):
    assert sig.reason.isna().all(), sig.reason.dropna().tolist()
    for row in sig.itertuples():
        g = _subset(pairs, row)
        n, d = g.neutral_score.to_numpy(), g.disability_score.to_numpy()
        diff = d - n
        assert row.n_pairs == len(g)
        assert row.mean_neutral == pytest.approx(n.mean())
        assert row.mean_disability == pytest.approx(d.mean())
        assert row.mean_diff == pytest.approx(diff.mean())
        t = stats.ttest_rel(d, n)
        assert row.paper_t_stat == pytest.approx(t.statistic, rel=1e-10)
        assert row.paper_t_p == pytest.approx(t.pvalue, rel=1e-10)
        f = stats.f_oneway(n, d)
        assert row.paper_anova_f == pytest.approx(f.statistic, rel=1e-10)
        assert row.paper_anova_p == pytest.approx(f.pvalue, rel=1e-10)
        # the paper's two-group ANOVA is the unpaired t-test squared
        assert row.paper_anova_f == pytest.approx(stats.ttest_ind(n, d).statistic ** 2, rel=1e-10)
        assert row.pair_wilcoxon_p == pytest.approx(stats.wilcoxon(d, n).pvalue, rel=1e-10)


def test_effect_sizes_against_identities_and_statsmodels(sig, pairs):
    for row in sig.itertuples():
        g = _subset(pairs, row)
        n, d = g.neutral_score.to_numpy(), g.disability_score.to_numpy()
        # d_z: the t identity and statsmodels' descriptive stats (ddof=1)
        assert row.cohen_dz == pytest.approx(row.paper_t_stat / np.sqrt(row.n_pairs), rel=1e-10)
        ds = DescrStatsW(d - n, ddof=1)
        assert row.cohen_dz == pytest.approx(ds.mean / ds.std, rel=1e-10)
        # pooled d for two equal groups: d = t_ind * sqrt(1/n1 + 1/n2)
        t_ind = stats.ttest_ind(d, n, equal_var=True).statistic
        assert row.cohen_d_pooled == pytest.approx(t_ind * np.sqrt(2.0 / len(n)), rel=1e-10)
        assert np.sign(row.cohen_d_pooled) == np.sign(row.mean_diff)


def _holm(p):
    p = np.asarray(p, float)
    m = len(p)
    order = np.argsort(p)
    adj = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adj[i] = running
    return adj


def _bh(p):
    p = np.asarray(p, float)
    m = len(p)
    order = np.argsort(p)[::-1]
    adj = np.empty(m)
    running = 1.0
    for k, i in enumerate(order):
        rank = m - k
        running = min(running, p[i] * m / rank)
        adj[i] = running
    return adj


def test_holm_and_bh_by_hand_within_each_model_and_metric(sig):
    for _, g in sig.groupby(KEYS):
        assert len(g) == 8  # all slices of one model and metric form one family
        np.testing.assert_allclose(g.p_holm, _holm(g.query_t_p), rtol=1e-12)
        np.testing.assert_allclose(g.p_bh, _bh(g.query_t_p), rtol=1e-12)
        assert (g.p_holm >= g.query_t_p - 1e-15).all() and (g.p_bh >= g.query_t_p - 1e-15).all()


def test_adjustment_family_does_not_span_models(pairs):
    one = significance(pairs[pairs.model_id == "m1"], n_boot=50)
    both = significance(pairs, n_boot=50)
    both = both[both.model_id == "m1"].reset_index(drop=True)
    pd.testing.assert_series_equal(one.p_holm, both.p_holm)
    pd.testing.assert_series_equal(one.p_bh, both.p_bh)


def test_adjustment_skips_slices_without_p():
    rows = []
    for q in range(6):  # overall + domain A: fine; domain B: one pair only
        rows.append(
            dict(
                task="t",
                model_id="m",
                arm="a",
                metric="x",
                direction="higher_is_better",
                domain="A" if q < 5 else "B",
                disability_id="vision",
                query_id=f"q{q}",
                neutral_score=float(q),
                disability_score=float(q) - [1, 2, 0.5, 3, 1.5, 2][q],
            )
        )
    s = significance(pd.DataFrame(rows), n_boot=50)
    b = s[s.slice_value == "B"].iloc[0]
    assert np.isnan(b.query_t_p) and np.isnan(b.p_holm) and np.isnan(b.p_bh)
    assert "n<2" in b.reason and "p_holm/p_bh: no query_t_p" in b.reason
    assert "query_t_test: fewer than 2 queries" in b.reason and not b.significant
    ok = s[s.query_t_p.notna()]
    assert len(ok) == 3  # overall, domain A, disability vision
    np.testing.assert_allclose(ok.p_holm, _holm(ok.query_t_p))
    np.testing.assert_allclose(ok.p_bh, _bh(ok.query_t_p))


def _one_slice(neutral, disability, clusters=None):
    n = len(neutral)
    df = pd.DataFrame(
        dict(
            task="t",
            model_id="m",
            arm="a",
            metric="x",
            direction="higher_is_better",
            domain="D",
            disability_id="vision",
            query_id=clusters if clusters is not None else [f"q{i}" for i in range(n)],
            neutral_score=neutral,
            disability_score=disability,
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = significance(df, n_boot=100)
    return out[out.slice == "overall"].iloc[0]


def test_n1_is_null_with_reason():
    r = _one_slice([0.5], [0.3])
    assert r.n_pairs == 1 and r.mean_diff == pytest.approx(-0.2)
    for col in (
        "paper_t_stat",
        "paper_t_p",
        "paper_anova_f",
        "paper_anova_p",
        "cohen_dz",
        "cohen_d_pooled",
        "pair_wilcoxon_p",
        "ci_low",
        "ci_high",
        "sd_diff",
    ):
        assert np.isnan(r[col]), col
    assert "paper_t_test: n<2" in r.reason and "fewer than 2 clusters" in r.reason


def test_n2_small_sample_is_computed():
    r = _one_slice([0.5, 0.7], [0.3, 0.6])
    t = stats.ttest_rel([0.3, 0.6], [0.5, 0.7])
    assert r.paper_t_p == pytest.approx(t.pvalue)
    assert r.pair_wilcoxon_p == pytest.approx(stats.wilcoxon([0.3, 0.6], [0.5, 0.7]).pvalue)
    assert not np.isnan(r.ci_low)


def test_zero_variance_of_differences():
    # a constant shift: t and d_z are undefined (scipy would say inf and p=0), the rest is fine
    r = _one_slice([0.1, 0.5, 0.9, 0.3], [0.0, 0.4, 0.8, 0.2])
    assert np.isnan(r.paper_t_stat) and np.isnan(r.paper_t_p) and np.isnan(r.cohen_dz)
    assert "paper_t_test: zero variance of differences" in r.reason
    assert r.sd_diff == 0.0
    assert r.mean_diff == pytest.approx(-0.1)
    assert r.paper_anova_p == pytest.approx(
        stats.f_oneway([0.1, 0.5, 0.9, 0.3], [0.0, 0.4, 0.8, 0.2]).pvalue
    )
    assert not np.isnan(r.pair_wilcoxon_p) and not np.isnan(r.cohen_d_pooled)
    assert r.ci_low == pytest.approx(-0.1) and r.ci_high == pytest.approx(-0.1)


def test_all_ties_zero_differences():
    r = _one_slice([3.0, 5.0, 5.0], [3.0, 5.0, 5.0])
    assert r.mean_diff == 0
    assert np.isnan(r.paper_t_p) and np.isnan(r.pair_wilcoxon_p)
    assert "pair_wilcoxon: all differences zero" in r.reason


def test_constant_conditions_anova_is_null():
    r = _one_slice([5.0, 5.0, 5.0], [4.0, 4.0, 4.0])
    assert np.isnan(r.paper_anova_f) and np.isnan(r.paper_anova_p) and np.isnan(r.cohen_d_pooled)
    assert "paper_anova: zero variance within every group" in r.reason
    assert "cohen_d_pooled: zero variance within both conditions" in r.reason


# The same values in both conditions, in every order: scipy's f_oneway gives F = +-1e-32 and
# p ~ 1 or NaN depending on the order; the answer is F = 0, p = 1 (equal means, some spread).
SAME_VALUES = [0.1, 0.7, 0.2, -0.35, 0.3]


@pytest.mark.parametrize("order", list(itertools.permutations(range(5)))[::7])
def test_identical_conditions_anova_is_exactly_zero_and_one(order):
    neutral = np.array(SAME_VALUES)
    disability = neutral[list(order)]
    r = _one_slice(neutral, disability)
    assert r.paper_anova_f == 0.0 and r.paper_anova_p == 1.0
    assert r.cohen_d_pooled == 0.0
    reason = r.reason if isinstance(r.reason, str) else ""
    assert "paper_anova" not in reason and "cohen_d_pooled" not in reason


def test_scipy_is_inconsistent_on_identical_conditions():
    """The reason for deciding the case before scipy: its F and p there are rounding noise."""
    outcomes = set()
    for order in itertools.permutations(range(5)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.f_oneway(np.array(SAME_VALUES), np.array(SAME_VALUES)[list(order)])
        outcomes.add((res.statistic == 0.0, bool(np.isnan(res.pvalue))))
    assert outcomes != {(True, False)}  # scipy does not give exactly F = 0, p = 1 everywhere


def test_equal_means_different_values_anova_zero():
    r = _one_slice([1.0, 2.0, 3.0], [3.0, 1.0, 2.0])
    assert r.paper_anova_f == 0.0 and r.paper_anova_p == 1.0
    r = _one_slice([0.1 + 0.2, 0.0, 0.6], [0.3, 0.3, 0.3])  # 0.1 + 0.2 != 0.3 in binary
    assert r.paper_anova_f == 0.0 and r.paper_anova_p == 1.0


def test_wilcoxon_method_is_recorded_and_matches_scipy_auto():
    cases = {
        "exact": (
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            [1.5, 2.25, 2.0, 5.5, 4.1, 7.3],
        ),  # no ties, no zeros
        "exact_permutation": (
            [1.0, 2.0, 3.0, 4.0, 5.0],
            [2.0, 3.0, 3.0, 4.0, 4.0],
        ),  # a zero and ties
    }
    for method, (n, d) in cases.items():
        r = _one_slice(n, d)
        assert r.pair_wilcoxon_method == method
        assert r.pair_wilcoxon_p == pytest.approx(
            stats.wilcoxon(np.array(d) - np.array(n)).pvalue, rel=1e-12
        )
    rng = np.random.default_rng(4)
    n = rng.integers(0, 5, 30).astype(float)
    d = n + rng.integers(-2, 3, 30)  # ties and zeros, n > 13
    r = _one_slice(n, d)
    assert r.pair_wilcoxon_method == "normal_approx"
    assert r.pair_wilcoxon_p == pytest.approx(stats.wilcoxon(d - n).pvalue, rel=1e-12)
    r = _one_slice([1.0, 2.0], [1.0, 2.0])
    assert pd.isna(r.pair_wilcoxon_method) and np.isnan(r.pair_wilcoxon_p)


def test_missing_scores_dropped_and_empty_input_typed(pairs):
    p = pairs.copy()
    p.loc[0, "neutral_score"] = np.nan
    p.loc[1, "disability_score"] = None
    s = significance(p, n_boot=20)
    assert s.loc[(s.model_id == "m1") & (s.slice == "overall"), "n_pairs"].item() == 58
    empty = significance(pairs.iloc[:0], n_boot=20)
    assert empty.empty and dict(empty.dtypes.astype(str)) == SIGNIFICANCE_SCHEMA
    with pytest.raises(ValueError, match="lacks column"):
        significance(pairs.drop(columns=["query_id"]))


def test_result_independent_of_row_order(pairs, sig):
    shuffled = pairs.sample(frac=1.0, random_state=3)
    pd.testing.assert_frame_equal(significance(shuffled, n_boot=200, seed=1), sig)


# --------------------------------------------------------------------------- bootstrap


def _clustered(k=20, m=8, seed=0, truth=-0.3):
    """k queries, m pairs each, every pair of a query has the same difference."""
    rng = np.random.default_rng(seed)
    per_query = truth + rng.normal(0, 1.0, size=k)
    diffs = np.repeat(per_query, m)
    clusters = np.repeat([f"q{i}" for i in range(k)], m)
    return diffs, clusters, per_query


def test_bootstrap_reproducible_and_seeded():
    diffs, clusters, _ = _clustered()
    a = cluster_bootstrap_ci(diffs, clusters, n_boot=500, seed=7)
    b = cluster_bootstrap_ci(diffs, clusters, n_boot=500, seed=7)
    c = cluster_bootstrap_ci(diffs, clusters, n_boot=500, seed=8)
    assert a == b and a != c and a[0] < np.mean(diffs) < a[1] and a[2] is None


def test_bootstrap_resamples_clusters_not_pairs():
    diffs, clusters, per_query = _clustered(k=20, m=8)
    lo_c, hi_c, _ = cluster_bootstrap_ci(diffs, clusters, n_boot=4000, seed=0)
    lo_p, hi_p, _ = cluster_bootstrap_ci(diffs, np.arange(diffs.size), n_boot=4000, seed=0)
    # pairs of a query are copies: resampling pairs pretends there are 160 independent
    # observations and gives a CI about sqrt(8) times too narrow
    assert (hi_c - lo_c) / (hi_p - lo_p) == pytest.approx(np.sqrt(8), rel=0.2)
    # hand check: the cluster bootstrap of equal-size clusters is the ordinary
    # bootstrap of the cluster means, SE = sd(means, ddof=0) / sqrt(k)
    se = np.std(per_query, ddof=0) / np.sqrt(len(per_query))
    assert (hi_c - lo_c) / 2 == pytest.approx(1.96 * se, rel=0.12)
    # and significance() resamples by its cluster column
    df = pd.DataFrame(
        dict(
            task="t",
            model_id="m",
            arm="a",
            metric="x",
            direction="higher_is_better",
            domain="D",
            disability_id="vision",
            query_id=clusters,
            image_id=np.arange(diffs.size),
            neutral_score=0.0,
            disability_score=diffs,
        )
    )
    by_query = significance(df, n_boot=4000).iloc[0]
    by_pair = significance(df, cluster_col="image_id", n_boot=4000).iloc[0]
    assert by_query.n_clusters == 20 and by_pair.n_clusters == 160
    assert (by_query.ci_high - by_query.ci_low) > 2 * (by_pair.ci_high - by_pair.ci_low)


def test_bootstrap_ci_covers_the_truth():
    truth, hits, sims = -0.3, 0, 200
    for s in range(sims):
        rng = np.random.default_rng(1000 + s)
        k = 30
        sizes = rng.integers(1, 6, size=k)  # unequal clusters
        effect = truth + rng.normal(0, 0.5, size=k)
        diffs = np.concatenate([e + rng.normal(0, 0.3, size=z) for e, z in zip(effect, sizes)])
        clusters = np.repeat(np.arange(k), sizes)
        lo, hi, _ = cluster_bootstrap_ci(diffs, clusters, n_boot=400, seed=s)
        hits += lo <= truth <= hi
    assert 0.87 <= hits / sims <= 0.995


def test_bootstrap_degenerate():
    assert cluster_bootstrap_ci([0.1, 0.2], ["q", "q"], n_boot=10)[2] == "fewer than 2 clusters"
    assert cluster_bootstrap_ci([], [], n_boot=10)[2] == "no pairs"
    lo, hi, why = cluster_bootstrap_ci([np.nan, 0.2, 0.4], ["a", "b", "c"], n_boot=50)
    assert why is None and 0.2 <= lo <= hi <= 0.4


# --------------------------------------------------------------------------- model comparison


def test_model_comparison_matches_f_oneway():
    p = make_pairs(models=("m1", "m2", "m3"))
    p.loc[p.model_id == "m3", "disability_score"] -= 1.0
    out = model_comparison(p)
    assert dict(out.dtypes.astype(str)) == MODEL_COMPARISON_SCHEMA
    row = out.iloc[0]
    groups = [(p.disability_score - p.neutral_score)[p.model_id == m] for m in ("m1", "m2", "m3")]
    f = stats.f_oneway(*groups)
    assert row.k_models == 3 and row.n_pairs == len(p)
    assert row.anova_f == pytest.approx(f.statistic) and row.anova_p == pytest.approx(f.pvalue)
    assert json.loads(row.n_per_model) == {"m1": 60, "m2": 60, "m3": 60}
    assert json.loads(row.mean_diff_per_model)["m3"] == pytest.approx(groups[2].mean())
    assert pd.isna(row.reason)


def test_model_comparison_independent_of_row_order():
    """Every value, the per-model means written as JSON text included, is bit-identical
    whatever order the pairs arrive in (an incremental build reads them in another order)."""
    rng = np.random.default_rng(7)
    p = make_pairs(models=("m1", "m2", "m3"))
    p["disability_score"] = p.disability_score + rng.normal(0, 1e-3, len(p)) / 3
    first = model_comparison(p)
    for seed in range(8):
        pd.testing.assert_frame_equal(
            model_comparison(p.sample(frac=1.0, random_state=seed)), first, check_exact=True
        )


def test_model_comparison_from_duckdb_arrays_is_bit_identical():
    """The mart's path (each model's differences collected into an array by DuckDB with
    model_diffs_sql, then model_comparison_of_diffs) gives every value of model_comparison
    over the pairs, bit for bit: non-finite differences and pairs of no model left out,
    several arms and metrics, any row order."""
    import duckdb

    rng = np.random.default_rng(11)
    p = make_pairs(models=("m2", "m1", "m3"))
    p["disability_score"] = p.disability_score + rng.normal(0, 1e-3, len(p)) / 3
    p = pd.concat([p, p.assign(arm="prompt", metric="vader_compound")], ignore_index=True)
    p.loc[3, "disability_score"] = np.nan
    p.loc[4, "neutral_score"] = np.inf
    p.loc[5, "model_id"] = None
    p.loc[p.model_id.eq("m3") & p.arm.eq("prompt"), "disability_score"] -= 0.5
    expected = model_comparison(p)
    assert len(expected) == 2 and expected.n_pairs.tolist() == [177, 180]
    con = duckdb.connect()
    for seed in range(3):
        shuffled = p.sample(frac=1.0, random_state=seed)  # noqa: F841 (read by DuckDB)
        diffs = con.sql("select * from shuffled").query("pairs", model_diffs_sql()).df()
        assert len(diffs) == 6
        got = model_comparison_of_diffs(diffs)
        pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_model_comparison_degenerate():
    p = make_pairs(models=("m1",))
    r = model_comparison(p).iloc[0]
    assert np.isnan(r.anova_f) and r.reason == "anova: fewer than 2 models"
    q = make_pairs(models=("m1", "m2"))
    q["disability_score"] = q.neutral_score + np.where(q.model_id == "m1", -1.0, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = model_comparison(q).iloc[0]
    assert np.isnan(r.anova_p) and "zero variance" in r.reason
    one_each = q.groupby("model_id").head(1)
    assert "no more pairs than models" in model_comparison(one_each).iloc[0].reason
    assert model_comparison(q.iloc[:0]).empty


def test_model_comparison_identical_models_is_f_zero_p_one():
    """One checkpoint served under two names (or greedy twins): identical differences, F = 0, p = 1,
    whatever the row order, where scipy gives F = +-1e-32 and p ~ 1 or NaN."""
    base = make_pairs(models=("m1",), seed=2)
    twins = pd.concat([base, base.assign(model_id="m2")], ignore_index=True)
    for seed in range(6):
        shuffled = twins.sample(frac=1.0, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = model_comparison(shuffled).iloc[0]
        assert r.k_models == 2 and r.anova_f == 0.0 and r.anova_p == 1.0 and pd.isna(r.reason)
    # a third model that differs: scipy's F and p, never negative
    third = pd.concat(
        [twins, base.assign(model_id="m3", disability_score=base.disability_score - 0.5)]
    )
    r = model_comparison(third).iloc[0]
    groups = [
        (g.disability_score - g.neutral_score).to_numpy() for _, g in third.groupby("model_id")
    ]
    f = stats.f_oneway(*groups)
    assert r.anova_f == pytest.approx(f.statistic, rel=1e-10) and r.anova_p == pytest.approx(
        f.pvalue, rel=1e-10
    )


def test_oneway_anova_conventions():
    from ableaudit.stats.paired import oneway_anova

    assert oneway_anova([np.array([1.0, 2.0]), np.array([2.0, 1.0])]) == (0.0, 1.0, None)
    f, p, why = oneway_anova([np.array([3.0, 3.0]), np.array([3.0, 3.0])])  # 0/0
    assert np.isnan(f) and np.isnan(p) and "zero variance within every group" in why
    f, p, why = oneway_anova(
        [np.array([3.0, 3.0]), np.array([4.0, 4.0])]
    )  # c/0: no finite F either
    assert np.isnan(f) and np.isnan(p) and "zero variance within every group" in why
    f, p, why = oneway_anova([np.array([1.0, 2.0, 4.0]), np.array([2.0, 3.0, 7.0])])
    ref = stats.f_oneway([1.0, 2.0, 4.0], [2.0, 3.0, 7.0])
    assert (
        why is None
        and f == pytest.approx(ref.statistic, rel=1e-12)
        and p == pytest.approx(ref.pvalue, rel=1e-12)
    )


def test_wilcoxon_small_samples_with_ties_and_zeros_match_scipy():
    from ableaudit.stats.paired import wilcoxon_exact_permutation_p

    rng = np.random.default_rng(5)
    cases = [
        np.array([1.0, 1.0, -1.0, 2.0, 0.0]),
        np.array([0.5, 0.5, 0.5]),
        np.array([2.0, -2.0, 0.0, 0.0, 3.0, 3.0]),
    ]
    cases += [rng.integers(-3, 3, size=int(rng.integers(2, 11))).astype(float) for _ in range(12)]
    for d in cases:
        if not d.any():
            continue
        assert wilcoxon_exact_permutation_p(d) == pytest.approx(
            stats.wilcoxon(d).pvalue, rel=1e-12
        ), d
        r = _one_slice(np.zeros(d.size), d)
        assert r.pair_wilcoxon_p == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-12), d


def test_optional_domain_disability_slice(pairs):
    from ableaudit.stats.paired import ALL_SLICES

    s = significance(pairs[pairs.model_id == "m1"], n_boot=20, slices=ALL_SLICES)
    cross = s[s.slice == "domain_disability"]
    assert len(cross) == 3 * 4 and "education|vision" in set(cross.slice_value)
    assert (cross.n_pairs == 5).all()
    with pytest.raises(ValueError, match="unknown slice"):
        significance(pairs, slices=("nope",))
