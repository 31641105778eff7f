"""What the dbt Python models share: reading their inputs through ``dbt.ref`` and typed Arrow output.

``dbt.ref("name")`` declares the dependency in dbt's DAG and returns a DuckDB
relation on the model's own connection; ``read`` filters and projects it in
DuckDB before anything reaches Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

ARROW_TYPES: dict[str, pa.DataType] = {
    "str": pa.string(),
    "float64": pa.float64(),
    "int64": pa.int64(),
    "bool": pa.bool_(),
}
"""The Arrow type of each dtype name the statistics schemas use."""


def _relation_arrow(relation: Any) -> pa.Table:
    fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
    table = fetch()
    return table.read_all() if isinstance(table, pa.RecordBatchReader) else table


def read(
    relation: Any, columns: Sequence[str] | None = None, where: str | None = None
) -> pd.DataFrame:
    """The rows of ``relation`` (``dbt.ref("name")``, written out in the model: dbt finds its
    dependencies by parsing the call), filtered by a SQL ``where`` and projected to ``columns``."""
    if where:
        relation = relation.filter(where)
    if columns:
        relation = relation.select(*columns)
    return _relation_arrow(relation).to_pandas()


def bootstrap_settings(n_boot: Any, seed: Any) -> tuple[int, int]:
    """var('bootstrap_samples') and var('bootstrap_seed') as read by the model, with their defaults."""
    return meta(n_boot, 2000, int), meta(seed, 0, int)


def after_arm(schema: Mapping[str, str]) -> dict[str, str]:
    """A statistics schema with ``query_set`` after ``arm``: the marts' keys read task, model, arm,
    query set, then the rest (the statistics run per query set, which is never pooled)."""
    out: dict[str, str] = {}
    for column, dtype in schema.items():
        out[column] = dtype
        if column == "arm":
            out["query_set"] = "str"
    return out


def records(relation: Any) -> list[dict[str, Any]]:
    """The rows of ``relation`` as dicts, nulls as None (for row-wise work such as inference)."""
    return _relation_arrow(relation).to_pylist()


def meta(value: Any, default: Any, cast: type) -> Any:
    """A var read with ``dbt.config.meta_get`` (dbt parses those calls from the model's code, so each
    model makes the call itself), with its default when unset or empty."""
    return cast(default if value in (None, "") else value)


def reuse_flag(value: Any) -> bool:
    """var('stats_reuse') as a model reads it: anything but false, 0, no or off keeps rows."""
    return str(value).strip().lower() not in ("false", "0", "no", "off")


def view_definition(session: Any, schema: str, name: str) -> str | None:
    """The SQL of a view of the build (``schema.name``) as DuckDB holds it, with the vars and
    macros it was compiled with written out; None when there is no such view."""
    found = session.execute(
        "select sql from duckdb_views() where schema_name = ? and view_name = ?", [schema, name]
    ).fetchall()
    return found[0][0] if found else None


def to_arrow(frame: pd.DataFrame, schema: Mapping[str, str]) -> pa.Table:
    """``frame``'s columns in the order and types of ``schema`` (column -> dtype name); an empty
    frame gives an empty table with those columns."""
    if frame.empty:
        frame = pd.DataFrame(columns=list(schema))
    arrow_schema = pa.schema([(c, ARROW_TYPES[t]) for c, t in schema.items()])
    return pa.Table.from_pandas(frame[list(schema)], schema=arrow_schema, preserve_index=False)
