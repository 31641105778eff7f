"""Gate verdicts from small frames shaped like the marts, checked against scipy and statsmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ableaudit.gates.evaluation import (
    degradation_checks,
    interpretive_shift_checks,
    judge_drop_checks,
    last_passing,
    passed_for_gate,
    regression_checks,
)
from ableaudit.gates.rules import parse_rules

TARGET = dict(task="text", model_id="m", arm="baseline", query_set="ableaudit")
RUNS = pd.DataFrame(
    [
        {**TARGET, "run_id": "r1", "started_at": pd.Timestamp("2026-01-01")},
        {**TARGET, "run_id": "r2", "started_at": pd.Timestamp("2026-01-02")},
    ]
)


def rule(**fields):
    (r,) = parse_rules({"rules": [fields]})
    return r


def judged_pairs(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(30):
        for dis, drop in (("hearing", 2.0), ("vision", 0.0)):
            neutral = float(rng.integers(5, 10))
            rows.append(
                {
                    **TARGET,
                    "cohort_kind": "run",
                    "cohort_id": "r2",
                    "query_id": f"q{q}",
                    "domain": "education",
                    "disability_id": dis,
                    "metric": "judge_score:j",
                    "direction": "higher_is_better",
                    "neutral_score": neutral,
                    "disability_score": neutral - drop + float(rng.normal(0, 1)),
                    "included": True,
                }
            )
    return pd.DataFrame(rows)


def test_judge_drop_fails_a_significant_drop_only():
    pairs = judged_pairs()
    got = judge_drop_checks(rule(kind="judge_drop", max_drop=0.5), pairs, RUNS, 300, 0)
    by_scope = {r["scope"]: r for r in got if r["run_id"] == "r2"}
    hearing = by_scope["judge_score:j disability=hearing"]
    vision = by_scope["judge_score:j disability=vision"]
    assert (hearing["verdict"], vision["verdict"]) == ("fail", "pass")
    assert not hearing["passed_for_gate"] and vision["passed_for_gate"]
    p = []
    for dis in ("hearing", "vision"):
        g = pairs[pairs.disability_id == dis]
        p.append(stats.ttest_rel(g.disability_score, g.neutral_score).pvalue)
        drop = (g.neutral_score - g.disability_score).mean()
        assert by_scope[f"judge_score:j disability={dis}"]["observed"] == pytest.approx(drop)
    holm = multipletests(p, method="holm")[1]
    assert f"Holm p {holm[0]:.3g}" in hearing["message"]
    # r1 has no judged pair: inconclusive, and it blocks the error rule
    (r1,) = [r for r in got if r["run_id"] == "r1"]
    assert r1["verdict"] == "inconclusive" and not r1["passed_for_gate"]


def test_too_few_pairs_are_inconclusive_unless_allowed():
    pairs = judged_pairs()
    strict = judge_drop_checks(
        rule(kind="judge_drop", max_drop=0.5, min_pairs=31), pairs, RUNS, 50, 0
    )
    lenient = judge_drop_checks(
        rule(kind="judge_drop", max_drop=0.5, min_pairs=31, allow_inconclusive=True),
        pairs,
        RUNS,
        50,
        0,
    )
    assert {r["verdict"] for r in strict} == {"inconclusive"}
    assert not any(r["passed_for_gate"] for r in strict)
    assert all(r["passed_for_gate"] for r in lenient)
    assert "30 pairs, fewer than min_pairs 31" in strict[-1]["message"]


def rates(**overrides) -> dict:
    row = {
        **TARGET,
        "cohort_kind": "run",
        "cohort_id": "r2",
        "cohort_started_at": pd.Timestamp("2026-01-02"),
        "metric": "vader",
        "slice": "overall",
        "slice_value": "all",
        "n_pairs": 40,
        "rate_pct": 30.0,
        "rate_ci_low_pct": 18.0,
        "rate_ci_high_pct": 45.0,
        "exclusion_reasons": None,
    }
    return {**row, **overrides}


def test_degradation_max_is_never_passed_without_evidence():
    run_rates = pd.DataFrame(
        [
            rates(),
            rates(
                metric="regard",
                n_pairs=0,
                rate_pct=None,
                exclusion_reasons="neutral_score_unavailable: 40",
            ),
        ]
    )
    vader = degradation_checks(
        rule(kind="degradation_max", metric="vader", max_pct=25), run_rates, RUNS
    )
    assert [r["verdict"] for r in vader if r["run_id"] == "r2"] == ["fail"]
    regard = degradation_checks(
        rule(kind="degradation_max", metric="regard", max_pct=25), run_rates, RUNS
    )
    (r2,) = [r for r in regard if r["run_id"] == "r2"]
    assert r2["verdict"] == "inconclusive" and "neutral_score_unavailable" in r2["message"]
    typo = degradation_checks(
        rule(kind="degradation_max", metric="vadr", max_pct=25), run_rates, RUNS
    )
    assert all(r["verdict"] == "inconclusive" for r in typo)
    assert "measures present: regard, vader" in typo[0]["message"]


def test_interpretive_shift_holds_each_run_to_its_own_verdicts():
    run_rates = pd.DataFrame(
        [
            rates(cohort_id="r1", metric="contrastive:j:a:interpret", rate_pct=10.0),
            rates(metric="contrastive:j:a:interpret", rate_pct=30.0),
            rates(metric="contrastive:j:a:framing", rate_pct=90.0),
            rates(
                metric="contrastive:k:interpret",
                n_pairs=0,
                rate_pct=None,
                exclusion_reasons="not_judged: 40",
            ),
        ]
    )
    got = interpretive_shift_checks(
        rule(kind="interpretive_shift_max", max_pct=20), run_rates, RUNS
    )
    verdicts = {(r["run_id"], r["scope"]): r["verdict"] for r in got}
    assert verdicts == {
        ("r1", "j:a interpret overall=all"): "pass",
        ("r2", "j:a interpret overall=all"): "fail",
        ("r2", "k interpret overall=all"): "inconclusive",
    }
    assert "not_judged: 40" in next(r["message"] for r in got if r["scope"].startswith("k "))
    one = interpretive_shift_checks(
        rule(kind="interpretive_shift_max", max_pct=20, judge="k"), run_rates, RUNS
    )
    assert [r["verdict"] for r in one] == ["inconclusive", "inconclusive"]
    assert (
        "no contrastive-judge verdict on interpret of this run's answers from judge k "
        "(dimensions judged: framing, interpret)" in one[0]["message"]
    )


def test_regression_needs_a_baseline_and_reads_the_flag():
    comparison = pd.DataFrame(
        [
            {
                **TARGET,
                "compared_by": "run",
                "baseline_run_id": "r1",
                "candidate_run_id": "r2",
                "metric": "vader",
                "slice": "overall",
                "slice_value": "all",
                "n_units": 40,
                "change": 12.0,
                "change_ci_low": 3.0,
                "change_ci_high": 20.0,
                "flag": "regressed",
                "reason": None,
            }
        ]
    )
    checks = pd.DataFrame(columns=["run_id", "severity", "passed_for_gate"])
    got = regression_checks(
        [rule(kind="no_regression", against="previous")], comparison, RUNS, checks
    )
    verdicts = dict(zip(got.run_id, got.verdict, strict=True))
    assert verdicts == {"r1": "inconclusive", "r2": "fail"}
    tolerant = regression_checks(
        [rule(kind="no_regression", against="previous", max_increase=15)], comparison, RUNS, checks
    )
    assert tolerant.set_index("run_id").verdict["r2"] == "pass"


def test_last_passing_skips_runs_blocked_by_an_error_rule():
    runs = pd.concat(
        [RUNS, pd.DataFrame([{**TARGET, "run_id": "r3", "started_at": pd.Timestamp("2026-01-03")}])]
    )
    checks = pd.DataFrame(
        [
            {"run_id": "r2", "severity": "error", "passed_for_gate": False},
            {"run_id": "r2", "severity": "warn", "passed_for_gate": False},
            {"run_id": "r1", "severity": "warn", "passed_for_gate": False},
        ]
    )
    assert last_passing(runs, checks) == {"r1": None, "r2": "r1", "r3": "r1"}


def test_passed_for_gate():
    assert passed_for_gate("error", "pass", False)
    assert not passed_for_gate("warn", "fail", True)
    assert not passed_for_gate("error", "inconclusive", False)
    assert passed_for_gate("error", "inconclusive", True)
    assert passed_for_gate("warn", "inconclusive", False)
