"""ableaudit.stats.reuse: a group is computed again only when its inputs or settings change,
and a build that reuses rows equals a full recompute exactly."""

from __future__ import annotations

from types import SimpleNamespace

import duckdb
import pandas as pd
import pytest

from ableaudit.stats import paired, significance
from ableaudit.stats.reuse import (
    FINGERPRINT,
    code_digest,
    previous_rows,
    recorded_fingerprints,
    reuse_by_model,
    reuse_or_compute,
)
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


def _record(con, rows):
    con.execute("create schema if not exists dbt_state")
    con.execute(
        "create or replace table dbt_state.group_fingerprints (relation varchar, model_id varchar, "
        "n_rows bigint, hash_sum hugeint, hash_xor ubigint, columns varchar)"
    )
    for row in rows:
        con.execute("insert into dbt_state.group_fingerprints values (?, ?, ?, ?, ?, ?)", row)


def test_recorded_fingerprints_follow_each_models_record_and_the_settings(con):
    assert recorded_fingerprints(con, "main.pairs", {}) is None  # no record: every model computed
    _record(con, [("main.pairs", "a", 3, 10, 7, "x int"), ("main.pairs", "b", 2, 5, 1, "x int")])
    other_relation = ("main.other", "a", 9, 9, 9, "x int")
    con.execute(
        "insert into dbt_state.group_fingerprints values (?, ?, ?, ?, ?, ?)", other_relation
    )
    first = recorded_fingerprints(con, "main.pairs", {"k": 1})
    assert first.model_id.tolist() == ["a", "b"] and first[FINGERPRINT].nunique() == 2
    assert recorded_fingerprints(con, "main.pairs", {"k": 1}).equals(first)
    other = recorded_fingerprints(con, "main.pairs", {"k": 2})
    assert not (other[FINGERPRINT] == first[FINGERPRINT]).any()  # a setting changes every model
    con.execute("update dbt_state.group_fingerprints set hash_xor = 8 where model_id = 'a'")
    changed = recorded_fingerprints(con, "main.pairs", {"k": 1})
    assert (changed[FINGERPRINT] == first[FINGERPRINT]).tolist() == [False, True]
    assert recorded_fingerprints(con, "main.nothing", {"k": 1}) is None


def test_reuse_by_model_computes_the_changed_new_models_only_and_drops_gone_ones():
    def fingerprints(**models):
        return pd.DataFrame({"model_id": list(models), FINGERPRINT: list(models.values())})

    calls = []

    def compute(models):
        calls.append(models)
        chosen = ["a", "b", "c"] if models is None else models
        return pd.DataFrame({"model_id": chosen, "value": [f"new-{m}" for m in chosen]})

    columns = ["model_id", "value", FINGERPRINT]
    rows, reused, computed = reuse_by_model(None, None, compute, columns)
    assert calls == [None] and (reused, computed) == (0, 3)
    assert rows[FINGERPRINT].isna().all()  # without a record nothing is reused next time

    previous = pd.DataFrame(
        {
            "model_id": ["a", "b", "gone"],
            "value": ["old-a", "old-b", "old-gone"],
            FINGERPRINT: ["fa", "fb", "fg"],
        }
    )
    calls.clear()
    rows, reused, computed = reuse_by_model(
        previous, fingerprints(a="fa", b="fb2", c="fc"), compute, columns
    )
    assert calls == [["b", "c"]] and (reused, computed) == (1, 2)
    assert rows.sort_values("model_id").values.tolist() == [
        ["a", "old-a", "fa"],
        ["b", "new-b", "fb2"],
        ["c", "new-c", "fc"],
    ]
    calls.clear()
    rows, reused, computed = reuse_by_model(
        rows, fingerprints(a="fa", b="fb2", c="fc"), compute, columns
    )
    assert calls == [] and (reused, computed) == (3, 0) and len(rows) == 3
