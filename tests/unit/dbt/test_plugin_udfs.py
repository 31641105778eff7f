"""The plugin's SQL functions that are not scorers: Student's t quantile, as scipy gives it."""

from __future__ import annotations

import math

import duckdb
import pytest
from scipy import stats

from ableaudit.dbt.plugin import register_udfs


def test_t_quantile_is_scipys():
    con = duckdb.connect()
    register_udfs(con)
    rows = con.execute(
        "select p::double, df::double, ableaudit_t_quantile(p, df) from (values (0.975, 1.0), (0.975, 5.0), "
        "(0.5, 3.0), (0.025, 40.0), (0.975, null), (null, 4.0), (0.975, 0.0)) t(p, df)"
    ).fetchall()
    for p, df, q in rows[:4]:
        assert q == pytest.approx(stats.t.ppf(p, df), rel=1e-15)
    assert rows[4][2] is None and rows[5][2] is None
    assert math.isnan(rows[6][2])  # no degrees of freedom, no quantile
