"""Recompute a statistics mart only for the groups whose inputs changed.

A statistics mart (`significance`, `threshold_sensitivity`, ...) is computed group by group:
the rows of one group (e.g. one task, model, arm, query set and metric) depend on that
group's input rows and the settings alone. Each output row carries the group's
`inputs_fingerprint`: a digest of the group's input rows (as a multiset: the statistics
sort their input, so row order does not matter), the settings (vars such as
bootstrap_samples and bootstrap_seed) and the code (``code_digest``: the model's own source,
compiled by dbt with its config, vars and reuse key, every ``ableaudit`` module it imports, and
the versions of the libraries those import). A build reads the previous table (dbt's `this`),
keeps the rows of every group whose fingerprint is unchanged, and computes the others.
Every random stream is seeded per slice (`_common.stable_seed`), so a group computed now
equals the same group computed in a full recompute, bit for bit.

The digest of the input rows is computed in DuckDB (the sum of a 64-bit hash of each row,
with the row count), so an unchanged group is never read into Python.

A mart whose groups are models and whose input is an incremental model that records the
fingerprint of each model's rows (dbt_state.group_fingerprints, macro
record_group_fingerprints) takes those instead (``recorded_fingerprints``,
``reuse_by_model``): no input row is read for a model whose rows did not change.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pandas as pd

from ableaudit.dbt import code as _code

FINGERPRINT = "inputs_fingerprint"
"""The column of a reusing mart that holds its group's fingerprint."""


def code_digest(*modules: ModuleType | str | Path) -> str:
    """A digest of the code of ``modules`` (modules, or source files such as a compiled dbt
    Python model, whose ``__file__`` it is): their source, that of every ``ableaudit`` module they
    import, and the versions of the libraries those import (``ableaudit.dbt.code``). A change to
    any of them invalidates every reused row."""
    return _code.code_digest(*modules)


def fingerprints(
    relation: Any, keys: Sequence[str], values: Sequence[str], settings: Mapping[str, Any]
) -> pd.DataFrame:
    """One row per group of ``relation`` (a DuckDB relation): its ``keys`` and its fingerprint,
    from the multiset of its rows' ``values`` and the ``settings`` (JSON-serialisable)."""
    key_list = ", ".join(keys)
    row_hash = f"hash({', '.join(values)})"
    digests = relation.aggregate(
        f"{key_list}, count(*)::varchar as n_rows, sum({row_hash})::varchar as rows_hash",
        key_list,
    ).df()
    salt = json.dumps(dict(settings), sort_keys=True, default=str)
    digests[FINGERPRINT] = [
        hashlib.sha256(f"{salt}|{n}|{h}".encode()).hexdigest()[:32]
        for n, h in zip(digests["n_rows"], digests["rows_hash"])
    ]
    return digests[[*keys, FINGERPRINT]]


GROUP_FINGERPRINTS = "dbt_state.group_fingerprints"
"""Where the incremental models record the fingerprint of each model's rows."""


def recorded_fingerprints(
    session: Any, relation: str, settings: Mapping[str, Any]
) -> pd.DataFrame | None:
    """One row per model_id of ``relation`` (``schema.name`` of a model that records
    ``GROUP_FINGERPRINTS``): its fingerprint, from the recorded one of its rows and the
    ``settings``; no row of the relation is read. None when the relation has no record (then
    every model is computed)."""
    try:
        found = session.execute(
            f"select model_id, n_rows, hash_sum, hash_xor, columns from {GROUP_FINGERPRINTS} "
            "where relation = ? order by model_id",
            [relation],
        ).fetchall()
    except duckdb.Error:  # no record yet (a warehouse that never built the relation)
        return None
    if not found:
        return None
    salt = json.dumps(dict(settings), sort_keys=True, default=str)
    return pd.DataFrame(
        {
            "model_id": [model for model, *_ in found],
            FINGERPRINT: [
                hashlib.sha256(f"{salt}|{n}|{s}|{x}|{c}".encode()).hexdigest()[:32]
                for _, n, s, x, c in found
            ],
        }
    )


def reuse_by_model(
    previous: pd.DataFrame | None,
    current: pd.DataFrame | None,
    compute: Callable[[list[str] | None], pd.DataFrame],
    columns: Sequence[str],
) -> tuple[pd.DataFrame, int, int]:
    """The mart's rows: those of ``previous`` whose model's fingerprint in ``current``
    (``recorded_fingerprints``) is unchanged, and ``compute(model_ids)`` for the other models of
    ``current`` (``compute(None)``, every model, when ``current`` is None). Returns the rows, with
    the numbers of models reused and computed."""
    columns = list(columns)
    if current is None:
        rows = compute(None).assign(**{FINGERPRINT: None})
        return rows[columns], 0, rows["model_id"].nunique()
    reused = current.iloc[0:0]
    if previous is not None and not previous.empty:
        reused = current.merge(previous[["model_id", FINGERPRINT]].drop_duplicates())
    fresh = current[~current["model_id"].isin(reused["model_id"])]
    parts = []
    if not reused.empty:
        parts.append(previous.merge(reused, on=["model_id", FINGERPRINT]))
    if not fresh.empty:
        rows = compute(fresh["model_id"].tolist())
        parts.append(rows.drop(columns=FINGERPRINT, errors="ignore").merge(fresh, on="model_id"))
    parts = [p[columns] for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=columns), len(reused), len(fresh)
    return pd.concat(parts, ignore_index=True), len(reused), len(fresh)


def previous_rows(session: Any, this: Any, columns: Sequence[str]) -> pd.DataFrame | None:
    """The rows of the mart's previous build (``dbt.this``), or None when there is none or its
    columns differ from ``columns`` (a new schema is computed afresh)."""
    found = session.execute(
        "select column_name from information_schema.columns "
        "where table_catalog = ? and table_schema = ? and table_name = ? order by ordinal_position",
        [this.database, this.schema, this.identifier],
    ).fetchall()
    if [c for (c,) in found] != list(columns):
        return None
    return session.sql(f"select * from {this!r}").df()


def reuse_or_compute(
    session: Any,
    relation: Any,
    keys: Sequence[str],
    values: Sequence[str],
    settings: Mapping[str, Any],
    previous: pd.DataFrame | None,
    compute: Callable[[pd.DataFrame], pd.DataFrame],
    columns: Sequence[str],
) -> tuple[pd.DataFrame, int, int]:
    """The mart's rows: those of ``previous`` whose group's fingerprint is unchanged, and
    ``compute(rows of one group)`` for every other group of ``relation`` (on ``session``).

    ``compute`` gets one group's input rows (``keys`` and ``values``, sorted by all of them)
    and returns its output rows; the fingerprint column is added here. Returns the rows,
    sorted by ``keys`` (within a group, in ``compute``'s order), with the numbers of groups
    reused and computed.
    """
    keys, values, columns = list(keys), list(values), list(columns)
    current = fingerprints(relation, keys, values, settings)
    reused = current.iloc[0:0]
    if previous is not None and not previous.empty:
        known = previous[[*keys, FINGERPRINT]].drop_duplicates()
        reused = current.merge(known, on=[*keys, FINGERPRINT])
    fresh = current.merge(reused, on=[*keys, FINGERPRINT], how="left", indicator=True)
    fresh = fresh[fresh["_merge"] == "left_only"][[*keys, FINGERPRINT]]

    parts = []
    if not reused.empty:
        parts.append(previous.merge(reused[[*keys, FINGERPRINT]], on=[*keys, FINGERPRINT]))
    if not fresh.empty:
        for _, group in _changed_rows(session, relation, fresh, keys, values):
            out = compute(group.drop(columns=FINGERPRINT).reset_index(drop=True))
            parts.append(out.assign(**{FINGERPRINT: group[FINGERPRINT].iloc[0]}))
    parts = [p[columns] for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=columns), len(reused), len(fresh)
    rows = pd.concat(parts, ignore_index=True)
    rows = rows.sort_values(keys, kind="mergesort").reset_index(drop=True)
    return rows, len(reused), len(fresh)


def _changed_rows(session: Any, relation: Any, fresh: pd.DataFrame, keys: list, values: list):
    """(key, rows) of every group of ``fresh`` (keys and fingerprint), the rows sorted by all
    their columns. A null key matches a null key (is not distinct from): no row is dropped."""
    name = f"ableaudit_reuse_{uuid.uuid4().hex[:12]}"
    relation.create_view(f"{name}_inputs", replace=True)
    session.register(f"{name}_changed", fresh)
    on = " and ".join(f"i.{k} is not distinct from c.{k}" for k in keys)
    columns = ", ".join(f"i.{c}" for c in [*keys, *values])
    try:
        data = session.sql(
            f"select {columns}, c.{FINGERPRINT} from {name}_inputs i "
            f"join {name}_changed c on {on} order by {columns}"
        ).df()
    finally:
        session.unregister(f"{name}_changed")
        session.execute(f"drop view if exists {name}_inputs")
    return data.groupby(keys, sort=True, dropna=False)
