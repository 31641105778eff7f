"""The degradation rule (macros/is_degraded.sql, run in DuckDB), ableaudit.stats.sensitivity
(threshold sensitivity from the warehouse's flags), ableaudit.stats.ranks and ableaudit.stats.scaling.

The rule has no Python twin: the macro is rendered here and evaluated by DuckDB, and
its results are checked against hand-computed cases and against the printed formula
evaluated in exact rational arithmetic.
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction
from pathlib import Path

import duckdb
import jinja2
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ableaudit.stats.ranks import spearman_exact_p, spearman_test
from ableaudit.stats.scaling import SCALING_POINTS_SCHEMA, SCALING_SCHEMA, scaling, scaling_points
from ableaudit.stats.sensitivity import (
    THRESHOLD_SENSITIVITY_SCHEMA,
    count_sql,
    flag_counts,
    threshold_sensitivity,
    threshold_sensitivity_from_counts,
)

ROOT = Path(__file__).resolve().parents[3]
H, L = "higher_is_better", "lower_is_better"


# --------------------------------------------------------------------------- the rule, in SQL


class CompilerError(Exception):
    pass


def _raise(message):
    raise CompilerError(message)


def rule_sql(rule: str | None = None, var_rule: str = "strict_relative") -> str:
    """The SQL expression of macro is_degraded (rule given, or taken from the var as in dbt)."""
    env = jinja2.Environment()
    env.globals["var"] = lambda name, default=None: {"degradation_rule": var_rule}.get(
        name, default
    )
    env.globals["exceptions"] = type(
        "Exceptions", (), {"raise_compiler_error": staticmethod(_raise)}
    )
    env.globals["degradation_rule"] = env.from_string(
        (ROOT / "macros" / "degradation_rule.sql").read_text()
    ).module.degradation_rule
    module = env.from_string((ROOT / "macros" / "is_degraded.sql").read_text()).module
    return str(module.is_degraded("neutral", "disability", "direction", "threshold", rule=rule))


def degraded_sql(rows, rule: str | None = None, var_rule: str = "strict_relative") -> list:
    grid = pd.DataFrame(rows, columns=["neutral", "disability", "direction", "threshold"])
    con = duckdb.connect()
    con.register("grid", grid)
    out = con.execute(f"select {rule_sql(rule, var_rule)} as d from grid").df()["d"]
    return [None if pd.isna(v) else bool(v) for v in out]


STRICT_CASES = [
    (0.8, 0.76, H, 0.05, True),  # exactly at the boundary counts (0.8-0.76 is 0.04000000000000003)
    (0.8, 0.7601, H, 0.05, False),  # just inside the margin
    (0.8, 0.8, H, 0.0, False),  # a tie never counts, not even at 0%
    (0.8, 0.8, L, 0.0, False),
    (0.8, 0.7999, H, 0.0, True),  # at 0% any strict drop counts
    (0.8, 0.9, H, 0.0, False),  # an improvement is not a degradation
    (-0.5, -0.5, H, 0.05, False),  # tie with a negative neutral
    (-0.5, -0.52, H, 0.05, False),  # 0.02 < 0.05*|-0.5|
    (-0.5, -0.525, H, 0.05, True),  # exactly 0.025 = 0.05*|-0.5|
    (-0.5, -0.4, H, 0.05, False),  # better
    (0.0, 0.0, H, 0.05, False),  # a tie at 0
    (0.0, -0.001, H, 0.2, True),  # neutral 0: any strict drop is >= 0
    (100, 105, L, 0.05, True),  # lower_is_better mirrored: longer is worse
    (100, 104.9, L, 0.05, False),
    (100, 95, L, 0.05, False),
    (100, 100, L, 0.2, False),
    (7, 6, H, 0.10, True),  # 1 >= 0.7
    (7, 6.5, H, 0.10, False),  # 0.5 < 0.7
]

# The printed formula M_NQ - M_DQ >= t x M_NQ, worked by hand (gap in the metric's direction).
LITERAL_CASES = [
    (0.8, 0.76, H, 0.05, True),  # 0.04 >= 0.04
    (0.8, 0.7601, H, 0.05, False),  # 0.0399 < 0.04
    (0.8, 0.8, H, 0.0, True),  # 0 >= 0: at 0% a tie counts
    (0.8, 0.8, H, 0.05, False),  # 0 < 0.04
    (-0.5, -0.5, H, 0.05, True),  # tie, negative neutral: 0 >= -0.025
    (-0.5, -0.52, H, 0.05, True),  # 0.02 >= -0.025
    (-0.5, -0.48, H, 0.05, True),  # an improvement: -0.02 >= -0.025
    (-0.5, -0.47, H, 0.05, False),  # -0.03 < -0.025
    (-0.5, -0.4, H, 0.05, False),  # -0.1 < -0.025
    (0.0, 0.0, H, 0.05, True),  # tie at 0: 0 >= 0
    (0.0, 0.001, H, 0.05, False),  # -0.001 < 0
    (100, 105, L, 0.05, True),  # 5 >= 5
    (100, 104.9, L, 0.05, False),  # 4.9 < 5
    (100, 100, L, 0.0, True),  # 0 >= 0
    (0, 0, L, 0.2, True),  # 0 >= 0
    (7, 6, H, 0.10, True),  # 1 >= 0.7
    (7, 6.5, H, 0.10, False),  # 0.5 < 0.7
]


def test_strict_relative_rule_by_hand():
    got = degraded_sql([c[:4] for c in STRICT_CASES], rule="strict_relative")
    assert got == [c[4] for c in STRICT_CASES]


def test_paper_literal_rule_by_hand():
    got = degraded_sql([c[:4] for c in LITERAL_CASES], rule="paper_literal")
    assert got == [c[4] for c in LITERAL_CASES]


def test_paper_literal_is_the_printed_formula_in_exact_arithmetic():
    """Every pair of a decimal grid: the macro under 'paper_literal' equals M_NQ - M_DQ >= t x M_NQ
    evaluated on exact fractions (no rounding, no slack), for both directions."""
    values = [
        "-1",
        "-0.5",
        "-0.525",
        "-0.52",
        "-0.48",
        "0",
        "0.001",
        "0.76",
        "0.7601",
        "0.8",
        "0.84",
        "1",
        "95",
        "100",
        "105",
    ]
    thresholds = ["0", "0.01", "0.05", "0.1", "0.2"]
    rows, expected = [], []
    for n, d, direction, t in itertools.product(values, values, [H, L], thresholds):
        fn, fd, ft = Fraction(n), Fraction(d), Fraction(t)
        gap = fn - fd if direction == H else fd - fn
        rows.append((float(n), float(d), direction, float(t)))
        expected.append(gap >= ft * fn)
    got = degraded_sql(rows, rule="paper_literal")
    assert got == expected
    assert 0.2 < np.mean(expected) < 0.8  # both outcomes are exercised


def test_rules_differ_exactly_on_ties_and_nonpositive_neutral():
    """Where the strict rule and the printed formula part ways: the literal rule counts every pair
    the strict one does, plus ties (and small changes) whenever the margin t x M_NQ is <= 0."""
    values = [-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0]
    rows = [
        (n, d, dr, t) for n, d, dr, t in itertools.product(values, values, [H, L], [0.0, 0.05, 0.2])
    ]
    strict = degraded_sql(rows, rule="strict_relative")
    literal = degraded_sql(rows, rule="paper_literal")
    for (n, d, direction, t), s, lit in zip(rows, strict, literal):
        if s != lit:
            assert lit and not s
            assert n <= 0 or (d == n and t == 0), (n, d, direction, t)
        if n > 0 and d != n:  # a positive neutral score and a real change: the rules agree
            assert s == lit, (n, d, direction, t)
    ties = [(x, x, H, 0.05) for x in (-0.5, 0.0, 0.5)]
    assert degraded_sql(ties, rule="strict_relative") == [False, False, False]
    assert degraded_sql(ties, rule="paper_literal") == [True, True, False]


def test_rule_comes_from_the_var_and_unknown_rules_fail():
    rows = [(-0.5, -0.5, H, 0.05)]
    assert degraded_sql(rows, var_rule="strict_relative") == [False]
    assert degraded_sql(rows, var_rule="paper_literal") == [True]
    with pytest.raises(CompilerError, match="degradation_rule must be"):
        rule_sql(var_rule="literal")
    with pytest.raises(CompilerError, match="unknown rule"):
        rule_sql(rule="lenient")


def test_not_judged_is_null():
    rows = [(None, 0.5, H, 0.05), (0.5, None, H, 0.05), (0.5, 0.1, "sideways", 0.05)]
    for rule in ("strict_relative", "paper_literal"):
        assert degraded_sql(rows, rule=rule) == [None, None, None]


def test_no_python_twin_of_the_rule():
    """Python reads the flags from the warehouse; the package carries no copy of the rule."""
    import ableaudit.stats as package

    assert not hasattr(package, "is_degraded") and not hasattr(package, "is_improved")
    source = (ROOT / "ableaudit" / "stats" / "sensitivity.py").read_text()
    assert "neutral_score" not in source and "disability_score" not in source


# --------------------------------------------------------------------------- sensitivity


def flags_frame(spec) -> pd.DataFrame:
    """Flags as int_pair_thresholds has them: spec = {(model, threshold): [(included, degraded, improved), ...]}."""
    rows = []
    for (model, thr), pairs in spec.items():
        for i, (inc, deg, imp) in enumerate(pairs):
            rows.append(
                dict(
                    task="text",
                    model_id=model,
                    arm="baseline",
                    metric="vader",
                    direction=H,
                    threshold=thr,
                    degradation_rule="strict_relative",
                    included=inc,
                    degraded=deg if inc else None,
                    improved=imp if inc else None,
                    pair=i,
                )
            )
    out = pd.DataFrame(rows)
    for col in ("degraded", "improved"):
        out[col] = out[col].astype("boolean")
    return out


def test_threshold_sensitivity_counts_flags_and_matches_binom():
    rng = np.random.default_rng(0)
    spec = {}
    for model in ("m1", "m2"):
        for thr in (0.0, 0.05, 0.2):
            pairs = []
            for _ in range(40):
                u = rng.random()
                inc = u > 0.1
                deg, imp = (
                    (True, False) if u < 0.5 else (False, True) if u < 0.7 else (False, False)
                )
                pairs.append((inc, deg, imp))
            spec[(model, thr)] = pairs
    flags = flags_frame(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = threshold_sensitivity(flags)
    assert dict(out.dtypes.astype(str)) == THRESHOLD_SENSITIVITY_SCHEMA
    assert len(out) == 2 * 3
    for row in out.itertuples():
        g = flags[
            (flags.model_id == row.model_id) & (flags.threshold == row.threshold) & flags.included
        ]
        deg, imp = int(g.degraded.sum()), int(g.improved.sum())
        assert (row.n_pairs, row.n_degraded, row.n_improved, row.n_unchanged) == (
            len(g),
            deg,
            imp,
            len(g) - deg - imp,
        )
        assert row.degradation_pct == pytest.approx(100.0 * deg / len(g), rel=1e-12)
        assert row.improvement_pct == pytest.approx(100.0 * imp / len(g), rel=1e-12)
        # one-sided sign test, independently: P(X >= deg) for X ~ Bin(deg + imp, 1/2)
        assert row.sign_test_p == pytest.approx(stats.binom.sf(deg - 1, deg + imp, 0.5), rel=1e-9)
        assert (
            row.sign_test_method == "exact_binomial" and row.degradation_rule == "strict_relative"
        )


def test_sign_test_direction():
    worse = flags_frame({("m", 0.05): [(True, True, False)] * 9 + [(True, False, True)]})
    better = flags_frame({("m", 0.05): [(True, False, True)] * 9 + [(True, True, False)]})
    assert threshold_sensitivity(worse).iloc[0].sign_test_p == pytest.approx(11 / 1024, rel=1e-12)
    assert threshold_sensitivity(better).iloc[0].sign_test_p == pytest.approx(
        1 - 1 / 1024, rel=1e-12
    )


def test_degenerate_groups_keep_their_rows_with_reasons():
    ties = threshold_sensitivity(flags_frame({("m", 0.0): [(True, False, False)] * 3})).iloc[0]
    assert ties.n_pairs == 3 and ties.degradation_pct == 0.0 and np.isnan(ties.sign_test_p)
    assert ties.reason == "sign_test: no degraded or improved pairs" and pd.isna(
        ties.sign_test_method
    )
    # a metric whose pairs are all excluded (Regard unavailable): one row per threshold, n = 0
    none = threshold_sensitivity(
        flags_frame({("m", 0.0): [(False, None, None)] * 2, ("m", 0.05): [(False, None, None)] * 2})
    )
    assert len(none) == 2 and (none.n_pairs == 0).all() and none.degradation_pct.isna().all()
    assert none.reason.str.contains("degradation_pct: n=0").all() and (none.direction == H).all()
    one = threshold_sensitivity(flags_frame({("m", 0.0): [(True, True, False)]})).iloc[0]
    assert one.n_degraded == 1 and one.sign_test_p == pytest.approx(0.5)
    empty = threshold_sensitivity(flags_frame({("m", 0.0): [(True, True, False)]}).iloc[:0])
    assert empty.empty and dict(empty.dtypes.astype(str)) == THRESHOLD_SENSITIVITY_SCHEMA


def test_counting_in_duckdb_gives_what_counting_in_pandas_gives():
    """The mart counts the flags in SQL (count_sql); the counts, and the mart's rows from them,
    equal those counted in pandas, with null flags, a conflicting and a missing direction,
    a direction beside a null, a null key and an empty group."""
    rng = np.random.default_rng(1)
    spec = {
        (m, t): [
            (bool(rng.random() > 0.2), bool(rng.random() < 0.4), bool(rng.random() < 0.3))
            for _ in range(int(rng.integers(0, 30)))
        ]
        for m in ("m1", "m2", "m3")
        for t in (0.0, 0.05, 0.2)
    }
    spec[("m4", 0.05)] = [(False, None, None)] * 3
    flags = flags_frame(spec)
    flags.loc[flags.model_id == "m2", "direction"] = [H, L] * int(
        (flags.model_id == "m2").sum() / 2
    ) + ([H] if (flags.model_id == "m2").sum() % 2 else [])
    flags.loc[flags.model_id == "m3", "direction"] = None
    flags.loc[flags.index[flags.model_id == "m1"][-1], "direction"] = None  # a value and a null
    flags.loc[flags.index[:5], "model_id"] = None
    flags["included"] = flags["included"].astype("boolean")
    flags.loc[flags.index[7], "included"] = pd.NA
    keys = ["task", "model_id", "arm", "metric"]

    con = duckdb.connect()
    rel = con.from_df(flags)
    in_sql = rel.aggregate(*count_sql(keys)).df()
    in_pandas = flag_counts(flags, keys)
    order = keys + ["threshold"]
    a = in_sql.sort_values(order, na_position="last").reset_index(drop=True)
    b = in_pandas.sort_values(order, na_position="last").reset_index(drop=True)
    pd.testing.assert_frame_equal(a.astype(object), b.astype(object), check_dtype=False)
    assert b.direction.isna().sum() > 0  # conflicting and missing directions were counted
    pd.testing.assert_frame_equal(
        threshold_sensitivity_from_counts(in_sql, keys), threshold_sensitivity(flags, keys)
    )


# --------------------------------------------------------------------------- exact Spearman


def permutation_p(x, y) -> float:
    """scipy's own exact permutation test of Spearman's rho (all n! pairings enumerated)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return stats.permutation_test(
        (x,),
        lambda a: stats.spearmanr(a, y).statistic,
        permutation_type="pairings",
        n_resamples=np.inf,
    ).pvalue


def test_spearman_exact_p_small_n_closed_forms():
    # rho = +-1 over n distinct values: only 2 of the n! orderings reach |rho| = 1
    assert spearman_test([1, 2, 3], [30, 20, 10]) == (-1.0, 1 / 3, "exact_permutation", None)
    r = spearman_test([1.0, 7.0, 13.0, 70.0], [5.0, 6.0, 9.0, 40.0])
    assert r.rho == pytest.approx(1.0) and r.p == 1 / 12 and r.method == "exact_permutation"
    r = spearman_test(range(10), range(10))
    assert r.p == pytest.approx(2 / math.factorial(10), rel=1e-12)
    assert spearman_test([1, 2], [2, 1]).reason == "n<3"


def test_spearman_exact_p_equals_scipy_permutation_test_with_ties():
    rng = np.random.default_rng(1)
    checked = 0
    for n in range(3, 8):
        for _ in range(15):
            x, y = rng.integers(0, 4, n).astype(float), rng.integers(0, 5, n).astype(float)
            if np.ptp(x) == 0 or np.ptp(y) == 0:
                continue
            assert spearman_exact_p(x, y) == pytest.approx(
                permutation_p(x, y), rel=1e-12, abs=1e-15
            ), (x, y)
            checked += 1
    assert checked > 50


def test_spearman_above_ten_units_is_scipy_t_approx():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=11), rng.normal(size=11)
    r = spearman_test(x, y)
    ref = stats.spearmanr(x, y)
    assert (
        r.method == "t_approx"
        and r.rho == pytest.approx(ref.statistic)
        and r.p == pytest.approx(ref.pvalue)
    )


# --------------------------------------------------------------------------- scaling


def _degradation(rates: dict, metric="vader"):
    return pd.DataFrame(
        [
            dict(
                task="text",
                model_id=m,
                arm="baseline",
                metric=metric,
                slice="overall",
                slice_value="all",
                degradation_pct=v,
            )
            for m, v in rates.items()
        ]
    )


def test_scaling_matches_spearmanr_with_ties():
    rates = {"a": 50.0, "b": 45.0, "c": 45.0, "d": 30.0, "e": 20.0, "nosize": 99.0}
    sizes = pd.DataFrame(
        {"model_id": ["a", "b", "c", "d", "e"], "params_b": [0.5, 1.5, 7.0, 7.0, 70.0]}
    )
    deg = pd.concat(
        [_degradation(rates), _degradation(rates).assign(slice="domain", degradation_pct=0.0)]
    )
    out = scaling(deg, sizes)
    assert dict(out.dtypes.astype(str)) == SCALING_SCHEMA
    r = out.iloc[0]
    ref = stats.spearmanr([0.5, 1.5, 7.0, 7.0, 70.0], [50, 45, 45, 30, 20])
    assert (r.n_models, r.n_models_without_size) == (5, 1)
    assert r.spearman_rho == pytest.approx(ref.statistic)
    # five models: the exact permutation p, not spearmanr's t approximation
    assert r.spearman_method == "exact_permutation"
    assert r.spearman_p == pytest.approx(
        permutation_p([0.5, 1.5, 7.0, 7.0, 70.0], [50, 45, 45, 30, 20]), rel=1e-12
    )
    assert r.spearman_p != pytest.approx(ref.pvalue)
    assert r.spearman_rho < 0 and pd.isna(r.reason)
    pts = scaling_points(deg, sizes)
    assert dict(pts.dtypes.astype(str)) == SCALING_POINTS_SCHEMA
    assert pts.model_id.tolist() == ["a", "b", "c", "d", "e"]  # by size, only with a size


def test_scaling_exact_p_three_and_four_models():
    sizes = pd.DataFrame({"model_id": ["a", "b", "c", "d"], "params_b": [1.0, 7.0, 13.0, 70.0]})
    three = scaling(_degradation({"a": 30.0, "b": 20.0, "c": 10.0}), sizes).iloc[0]
    assert (
        three.spearman_rho == -1.0
        and three.spearman_p == 1 / 3
        and three.spearman_method == "exact_permutation"
    )
    four = scaling(_degradation({"a": 5.0, "b": 6.0, "c": 9.0, "d": 40.0}), sizes).iloc[0]
    assert four.spearman_rho == pytest.approx(1.0) and four.spearman_p == 1 / 12
    # not spearmanr's t approximation, which says p = 0 for a perfect rank correlation
    assert stats.spearmanr([1.0, 7.0, 13.0], [30.0, 20.0, 10.0]).pvalue < 1e-6


def test_scaling_degenerate():
    sizes = pd.DataFrame({"model_id": ["a", "b", "c"], "params_b": [1.0, 2.0, 3.0]})
    r = scaling(_degradation({"a": 10.0, "b": 20.0}), sizes).iloc[0]
    assert r.n_models == 2 and np.isnan(r.spearman_rho) and "fewer than 3 models" in r.reason
    r = scaling(_degradation({"a": 10.0, "b": 10.0, "c": 10.0}), sizes).iloc[0]
    assert np.isnan(r.spearman_rho) and "same degradation rate" in r.reason
    same = sizes.assign(params_b=7.0)
    r = scaling(_degradation({"a": 10.0, "b": 20.0, "c": 30.0}), same).iloc[0]
    assert np.isnan(r.spearman_p) and "same size" in r.reason and pd.isna(r.spearman_method)
    empty = scaling(
        _degradation({}).reindex(columns=["task", "model_id", "arm", "metric", "degradation_pct"]),
        sizes,
    )
    assert empty.empty and dict(empty.dtypes.astype(str)) == SCALING_SCHEMA
