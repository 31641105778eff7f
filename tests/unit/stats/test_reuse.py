"""ableaudit.stats.reuse: a group is computed again only when its inputs or settings change,
and a build that reuses rows equals a full recompute exactly."""

from __future__ import annotations

from types import SimpleNamespace

import duckdb
import pandas as pd
import pytest

from ableaudit.stats import paired, significance
from ableaudit.stats.reuse import FINGERPRINT, code_digest, previous_rows, reuse_or_compute
from tests.unit.stats.test_paired import make_pairs

KEYS = ["task", "model_id", "arm", "query_set", "metric"]
VALUES = ["direction", "domain", "disability_id", "query_id", "neutral_score", "disability_score"]


def _pairs(models) -> pd.DataFrame:
    df = make_pairs(seed=3, models=models, n_queries=9).assign(query_set="ableaudit")
    return df[KEYS + VALUES]


def _build(con, pairs, previous, n_boot=200, seed=0):
    con.register("pairs_df", pairs)
    con.execute("create or replace table pairs as select * from pairs_df")
    calls = []

    def compute(group):
        calls.append(group["model_id"].iloc[0])
        out = significance(group, n_boot=n_boot, seed=seed)
        return out.assign(query_set=group["query_set"].iloc[0])

    columns = [*significance(pairs.iloc[0:0]).columns, "query_set", FINGERPRINT]
    settings = {"n_boot": n_boot, "seed": seed, "code": code_digest(paired)}
    rows, reused, computed = reuse_or_compute(
        con, con.table("pairs"), KEYS, VALUES, settings, previous, compute, columns
    )
    return rows, reused, computed, calls


class _This(SimpleNamespace):
    """What dbt hands a Python model as ``dbt.this``: the parts, and the name as its repr."""

    def __repr__(self) -> str:
        return f"{self.database}.{self.schema}.{self.identifier}"


@pytest.fixture
def con():
    c = duckdb.connect()
    yield c
    c.close()


def test_one_more_model_computes_its_groups_only_and_equals_a_full_recompute(con):
    pairs_df = _pairs(["m1", "m2"])
    first, reused, computed, _ = _build(con, pairs_df, None)
    assert (reused, computed) == (0, 2)

    pairs_df = _pairs(["m1", "m2", "m3"])
    again, reused, computed, calls = _build(con, pairs_df, first)
    assert (reused, computed, calls) == (2, 1, ["m3"])
    full, _, _, _ = _build(con, pairs_df, None)
    pd.testing.assert_frame_equal(again, full)
    assert set(full.model_id) == {"m1", "m2", "m3"}


def test_a_changed_row_or_setting_computes_the_group_again(con):
    pairs_df = _pairs(["m1", "m2"])
    first, _, _, _ = _build(con, pairs_df, None)
    pairs_df.loc[pairs_df.index[0], "neutral_score"] += 1  # one score of m1
    _, reused, computed, calls = _build(con, pairs_df, first)
    assert (reused, computed, calls) == (1, 1, ["m1"])
    _, reused, computed, _ = _build(con, pairs_df, first, seed=1)
    assert (reused, computed) == (0, 2)


def test_a_group_gone_from_the_inputs_is_gone_from_the_rows(con):
    pairs_df = _pairs(["m1", "m2"])
    first, _, _, _ = _build(con, pairs_df, None)
    pairs_df = pairs_df[pairs_df.model_id == "m1"]
    rows, reused, computed, _ = _build(con, pairs_df, first)
    assert (reused, computed) == (1, 0) and set(rows.model_id) == {"m1"}


def test_previous_rows_are_read_only_when_the_columns_match(con):
    con.execute("create table main.mart as select 1 as a, 'x' as inputs_fingerprint")
    this = _This(database="memory", schema="main", identifier="mart")
    assert previous_rows(con, this, ["a", FINGERPRINT]).a.tolist() == [1]
    assert previous_rows(con, this, ["a", "b", FINGERPRINT]) is None
    missing = _This(database="memory", schema="main", identifier="nothing")
    assert previous_rows(con, missing, ["a"]) is None


def test_groups_with_equal_inputs_or_a_null_key_each_keep_their_rows(con):
    one = _pairs(["m1"])
    twin = one.assign(model_id="m2")  # the same pairs under another name: the same fingerprint
    lost = one.assign(model_id=None)  # a null key is still a group
    rows, reused, computed, _ = _build(con, pd.concat([one, twin, lost], ignore_index=True), None)
    assert (reused, computed) == (0, 3)
    per_model = rows.groupby("model_id", dropna=False).size()
    assert per_model.tolist() == [len(rows) // 3] * 3
    again, reused, computed, _ = _build(con, pd.concat([one, twin, lost], ignore_index=True), rows)
    assert (reused, computed) == (3, 0)
    pd.testing.assert_frame_equal(again, rows)
