"""compare_cohorts: rates, paired and unpaired tests, and the flag rule, checked with scipy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ableaudit.stats.runs import compare_cohorts


def cohort(flags: dict[tuple[str, str], bool]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(
                pair_id=f"{q}|{d}",
                query_set="s",
                query_id=q,
                domain="edu",
                disability_id=d,
                flagged=f,
            )
            for (q, d), f in flags.items()
        ]
    )


def overall(frame: pd.DataFrame) -> pd.Series:
    return frame[frame.slice == "overall"].iloc[0]


def test_paired_uses_mcnemar_on_discordant_units():
    rng = np.random.default_rng(3)
    keys = [(f"q{i}", d) for i in range(30) for d in ("hearing", "vision")]
    base = {k: bool(rng.random() < 0.2) for k in keys}
    cand = {k: (True if k[1] == "hearing" and rng.random() < 0.7 else v) for k, v in base.items()}
    got = overall(compare_cohorts(cohort(base), cohort(cand), n_boot=500))
    b, c = np.array(list(base.values())), np.array(list(cand.values()))
    assert got.paired and got.n_units == 60 and got.test == "mcnemar_exact"
    assert got.change == pytest.approx(100 * (c.mean() - b.mean()))
    worse, better = int((c & ~b).sum()), int((b & ~c).sum())
    assert got.p_value == pytest.approx(stats.binomtest(worse, worse + better).pvalue)
    assert got.flag == "regressed" and got.change_ci_low > 0


def test_disjoint_cohorts_are_compared_unpaired_with_fisher():
    base = {(f"a{i}", "hearing"): i % 5 == 0 for i in range(40)}
    cand = {(f"b{i}", "hearing"): i % 2 == 0 for i in range(40)}
    got = overall(compare_cohorts(cohort(base), cohort(cand), n_boot=500))
    assert not got.paired and got.n_units == 0 and got.test == "fisher_exact"
    table = [[20, 20], [8, 32]]
    assert got.p_value == pytest.approx(stats.fisher_exact(table).pvalue)
    assert got.change == pytest.approx(50 - 20)


def test_few_units_are_inconclusive_and_no_change_is_unchanged():
    few = {(f"q{i}", "hearing"): False for i in range(4)}
    got = overall(compare_cohorts(cohort(few), cohort({k: True for k in few}), min_units=10))
    assert got.flag == "inconclusive" and got.reason.startswith("4 matched units, fewer than 10")
    same = {(f"q{i}", "hearing"): i % 3 == 0 for i in range(30)}
    got = overall(compare_cohorts(cohort(same), cohort(same), n_boot=200))
    assert got.flag == "unchanged" and got.change == 0 and got.p_value == 1.0
