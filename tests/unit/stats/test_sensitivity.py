"""ableaudit.stats.sensitivity (Eq. 1 and threshold sensitivity) and ableaudit.stats.scaling."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import duckdb
import jinja2
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ableaudit.stats.scaling import SCALING_POINTS_SCHEMA, SCALING_SCHEMA, scaling, scaling_points
from ableaudit.stats.sensitivity import (
    DEFAULT_THRESHOLDS,
    THRESHOLD_SENSITIVITY_SCHEMA,
    is_degraded,
    is_improved,
    threshold_sensitivity,
)

ROOT = Path(__file__).resolve().parents[3]
H, L = "higher_is_better", "lower_is_better"


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    "neutral, disability, direction, threshold, expected",
    [
        (0.8, 0.76, H, 0.05, True),      # exactly at the boundary counts (0.8-0.76 is 0.04000000000000003)
        (0.8, 0.7601, H, 0.05, False),   # just inside the margin
        (0.8, 0.8, H, 0.0, False),       # a tie never counts, not even at 0%
        (0.8, 0.8, L, 0.0, False),
        (0.8, 0.7999, H, 0.0, True),     # at 0% any strict drop counts
        (0.8, 0.9, H, 0.0, False),       # an improvement is not a degradation
        (-0.5, -0.5, H, 0.05, False),    # tie with a negative neutral (paper's formula would count it)
        (-0.5, -0.52, H, 0.05, False),   # 0.02 < 0.05*|-0.5|; without abs() it would count
        (-0.5, -0.525, H, 0.05, True),   # exactly 0.025 = 0.05*|-0.5|
        (-0.5, -0.4, H, 0.05, False),    # better
        (0.0, -0.001, H, 0.2, True),     # neutral 0: any strict drop is >= 0
        (100, 105, L, 0.05, True),       # lower_is_better mirrored: longer is worse
        (100, 104.9, L, 0.05, False),
        (100, 95, L, 0.05, False),
        (100, 100, L, 0.2, False),
        (7, 6, H, 0.10, True),           # 1 >= 0.7
        (7, 6.5, H, 0.10, False),        # 0.5 < 0.7
    ],
)
def test_is_degraded_boundaries(neutral, disability, direction, threshold, expected):
    assert is_degraded(neutral, disability, direction, threshold) is expected
    # mirrored: under the opposite direction the same pair is an improvement exactly then
    assert is_improved(neutral, disability, H if direction == L else L, threshold) is expected


def test_is_improved_mirror():
    assert is_improved(0.8, 0.84, H, 0.05) is True
    assert is_improved(0.8, 0.839, H, 0.05) is False
    assert is_improved(0.8, 0.8, H, 0.0) is False
    assert is_improved(100, 95, L, 0.05) is True
    assert is_improved(-0.5, -0.475, H, 0.05) is True
    assert is_improved(-0.5, -0.48, H, 0.05) is False


def test_not_judged_is_na_and_vectorised():
    assert is_degraded(None, 0.5, H, 0.05) is pd.NA
    assert is_degraded(0.5, float("nan"), H, 0.05) is pd.NA
    assert is_degraded(0.5, 0.1, "sideways", 0.05) is pd.NA
    s = is_degraded(pd.Series([1.0, 2.0, None], index=[5, 6, 7]), pd.Series([0.5, 2.0, 1.0], index=[5, 6, 7]), H, 0.05)
    assert s.dtype == "boolean" and list(s.index) == [5, 6, 7]
    assert s.tolist() == [True, False, pd.NA]
    v = is_degraded(np.array([1.0, 1.0]), np.array([0.9, 1.1]), np.array([H, L]), np.array([0.05, 0.05]))
    assert v.tolist() == [True, True]


def test_python_rule_equals_the_sql_macro():
    """The same grid through macros/is_degraded.sql in DuckDB and through is_degraded()."""
    macro_src = (ROOT / "macros" / "is_degraded.sql").read_text()
    env = jinja2.Environment()
    module = env.from_string(macro_src).module
    expr = module.is_degraded("neutral", "disability", "direction", "threshold")
    values = [-1.0, -0.5, -0.525, -0.52, 0.0, 0.76, 0.7601, 0.8, 0.84, 1.0, 95.0, 100.0, 105.0]
    grid = pd.DataFrame(
        list(itertools.product(values, values, [H, L, "unknown"], DEFAULT_THRESHOLDS)),
        columns=["neutral", "disability", "direction", "threshold"],
    )
    grid.loc[0, "neutral"] = np.nan
    con = duckdb.connect()
    con.register("grid", grid)
    sql = con.execute(f"select {expr} as d from grid").df()["d"]
    py = is_degraded(grid.neutral, grid.disability, grid.direction, grid.threshold)
    assert sql.isna().tolist() == py.isna().tolist()
    ok = sql.notna()
    assert sql[ok].astype(bool).tolist() == py[ok].astype(bool).tolist()
    assert py[ok].sum() > 50  # the grid does exercise both outcomes


# --------------------------------------------------------------------------- sensitivity


def make_pairs(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for m, shift in (("m1", -0.05), ("m2", 0.03)):
        for i in range(60):
            n = float(np.round(rng.uniform(-0.9, 0.9), 2))
            d = float(np.round(n + shift + rng.normal(0, 0.08), 2))
            if i % 10 == 0:
                d = n  # ties
            rows.append(dict(task="text", model_id=m, arm="baseline", metric="vader", direction=H,
                             neutral_score=n, disability_score=d))
        for i in range(30):
            n = float(rng.integers(50, 200))
            rows.append(dict(task="text", model_id=m, arm="baseline", metric="verbosity", direction=L,
                             neutral_score=n, disability_score=float(n + rng.integers(-10, 30))))
    return pd.DataFrame(rows)


def _by_hand(g: pd.DataFrame, thr: float):
    deg = imp = 0
    for r in g.itertuples():
        worse = r.neutral_score - r.disability_score if r.direction == H else r.disability_score - r.neutral_score
        margin = thr * abs(r.neutral_score) - 1e-9
        deg += worse > 0 and worse >= margin
        imp += -worse > 0 and -worse >= margin
    return deg, imp


def test_threshold_sensitivity_by_hand_and_scipy():
    p = make_pairs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = threshold_sensitivity(p)
    assert dict(out.dtypes.astype(str)) == THRESHOLD_SENSITIVITY_SCHEMA
    assert len(out) == 2 * 2 * 5
    for row in out.itertuples():
        g = p[(p.model_id == row.model_id) & (p.metric == row.metric)]
        deg, imp = _by_hand(g, row.threshold)
        assert (row.n_pairs, row.n_degraded, row.n_improved) == (len(g), deg, imp)
        assert row.n_unchanged == len(g) - deg - imp
        assert row.degradation_pct == pytest.approx(100.0 * deg / len(g))
        # one-sided sign test, independently: P(X >= deg) for X ~ Bin(deg + imp, 1/2)
        assert row.sign_test_p == pytest.approx(stats.binom.sf(deg - 1, deg + imp, 0.5), rel=1e-9)
    for _, g in out.groupby(["model_id", "metric"]):
        assert g.sort_values("threshold").degradation_pct.is_monotonic_decreasing
    # the ties are never degraded: at 0% m1 vader has 6 unchanged pairs at least
    r = out[(out.model_id == "m1") & (out.metric == "vader") & (out.threshold == 0)].iloc[0]
    assert r.n_unchanged >= 6


def test_sign_test_direction():
    base = dict(task="t", model_id="m", arm="a", metric="x", direction=H)
    worse = pd.DataFrame([{**base, "neutral_score": 1.0, "disability_score": 0.5}] * 9
                         + [{**base, "neutral_score": 1.0, "disability_score": 1.5}] * 1)
    better = worse.assign(disability_score=2.0 - worse.disability_score)
    pw = threshold_sensitivity(worse, thresholds=[0.05]).iloc[0].sign_test_p
    pb = threshold_sensitivity(better, thresholds=[0.05]).iloc[0].sign_test_p
    assert pw == pytest.approx(11 / 1024) and pb == pytest.approx(1 - 1 / 1024)


def test_degenerate_groups():
    base = dict(task="t", model_id="m", arm="a", metric="x", direction=H)
    ties = pd.DataFrame([{**base, "neutral_score": 0.5, "disability_score": 0.5}] * 3)
    r = threshold_sensitivity(ties, thresholds=[0.0]).iloc[0]
    assert r.n_pairs == 3 and r.degradation_pct == 0.0 and np.isnan(r.sign_test_p)
    assert r.reason == "sign_test: no degraded or improved pairs"
    missing = pd.DataFrame([{**base, "neutral_score": None, "disability_score": 0.5}])
    r = threshold_sensitivity(missing, thresholds=[0.0]).iloc[0]
    assert r.n_pairs == 0 and np.isnan(r.degradation_pct) and "n=0" in r.reason and "not judged" in r.reason
    one = pd.DataFrame([{**base, "neutral_score": 0.5, "disability_score": 0.1}])
    r = threshold_sensitivity(one, thresholds=[0.0]).iloc[0]
    assert r.n_degraded == 1 and r.sign_test_p == pytest.approx(0.5)
    empty = threshold_sensitivity(ties.iloc[:0])
    assert empty.empty and dict(empty.dtypes.astype(str)) == THRESHOLD_SENSITIVITY_SCHEMA


# --------------------------------------------------------------------------- scaling


def _degradation(rates: dict, metric="vader"):
    return pd.DataFrame([dict(task="text", model_id=m, arm="baseline", metric=metric, slice="overall",
                              slice_value="all", degradation_pct=v) for m, v in rates.items()])


def test_scaling_matches_spearmanr_with_ties():
    rates = {"a": 50.0, "b": 45.0, "c": 45.0, "d": 30.0, "e": 20.0, "nosize": 99.0}
    sizes = pd.DataFrame({"model_id": ["a", "b", "c", "d", "e"], "params_b": [0.5, 1.5, 7.0, 7.0, 70.0]})
    deg = pd.concat([_degradation(rates), _degradation(rates).assign(slice="domain", degradation_pct=0.0)])
    out = scaling(deg, sizes)
    assert dict(out.dtypes.astype(str)) == SCALING_SCHEMA
    r = out.iloc[0]
    ref = stats.spearmanr([0.5, 1.5, 7.0, 7.0, 70.0], [50, 45, 45, 30, 20])
    assert (r.n_models, r.n_models_without_size) == (5, 1)
    assert r.spearman_rho == pytest.approx(ref.statistic) and r.spearman_p == pytest.approx(ref.pvalue)
    assert r.spearman_rho < 0 and pd.isna(r.reason)
    pts = scaling_points(deg, sizes)
    assert dict(pts.dtypes.astype(str)) == SCALING_POINTS_SCHEMA
    assert pts.model_id.tolist() == ["a", "b", "c", "d", "e"]  # by size, only with a size


def test_scaling_degenerate():
    sizes = pd.DataFrame({"model_id": ["a", "b", "c"], "params_b": [1.0, 2.0, 3.0]})
    r = scaling(_degradation({"a": 10.0, "b": 20.0}), sizes).iloc[0]
    assert r.n_models == 2 and np.isnan(r.spearman_rho) and "fewer than 3 models" in r.reason
    r = scaling(_degradation({"a": 10.0, "b": 10.0, "c": 10.0}), sizes).iloc[0]
    assert np.isnan(r.spearman_rho) and "same degradation rate" in r.reason
    same = sizes.assign(params_b=7.0)
    r = scaling(_degradation({"a": 10.0, "b": 20.0, "c": 30.0}), same).iloc[0]
    assert np.isnan(r.spearman_p) and "same size" in r.reason
    empty = scaling(_degradation({}).reindex(columns=["task", "model_id", "arm", "metric", "degradation_pct"]), sizes)
    assert empty.empty and dict(empty.dtypes.astype(str)) == SCALING_SCHEMA
