"""Which landing a failing dbt test's rows came from, so a build failure names the fix.

A data test fails on rows of a model; those rows came from raw.* through staging,
and every raw row carries the landing that wrote it. For each failing test this
module finds the offending rows (the test's own predicate on its model for dbt's
generic tests, the test's compiled query otherwise), follows them to their
landings (a ``landing_id`` column, which every ``stg_raw__*`` model carries, else
the key of a raw table), and says which landing to forget. A ``row_checks`` test also
says which of its rules the rows break (its ``failed_checks`` column), landed or not.
Read only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

# The raw tables a model's rows can be followed to by key, most specific first.
RAW_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("judgments", ("judgment_id",)),
    ("annotations", ("annotation_id",)),
    ("generations", ("generation_id",)),
    ("images", ("image_set", "image_id")),
    ("external_queries", ("query_set", "query_id", "disability_id")),
    ("adapters", ("adapter_id",)),
)


@dataclass
class Culprit:
    """A failing test and the landings its offending rows came from."""

    test: str
    """The test's name."""
    model: str | None
    """The model it tests (None for a singular test)."""
    offending: int
    """Rows of the model the test fails on."""
    landings: list[tuple[dict[str, Any], int]]
    """(raw.landings row, rows of it among the offending ones), most rows first."""
    broken: list[tuple[str, int]] = field(default_factory=list)
    """(the rules a row breaks, rows that break them), most rows first: for a test whose rows
    name them in a ``failed_checks`` column (``row_checks``)."""


def _quote(value: Any) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _manifest_nodes(project_dir: Path) -> dict[str, Any]:
    target = Path(os.environ.get("DBT_TARGET_PATH") or project_dir / "target")
    if not target.is_absolute():
        target = project_dir / target
    try:
        return json.loads((target / "manifest.json").read_text())["nodes"]
    except (OSError, ValueError, KeyError):
        return {}


def offending_sql(node: Any, nodes: dict[str, Any]) -> tuple[str, str | None]:
    """(a query of the rows the test fails on, the model's name); for dbt's generic tests the
    model's own rows, so their columns (and landing_id) come with them."""
    meta = getattr(node, "test_metadata", None)
    attached = nodes.get(getattr(node, "attached_node", None) or "", {})
    relation = attached.get("relation_name")
    model = attached.get("name")
    kwargs = dict(getattr(meta, "kwargs", None) or {})
    kwargs.update(kwargs.pop("arguments", None) or {})
    column = getattr(node, "column_name", None) or kwargs.get("column_name")
    name = getattr(meta, "name", None)
    namespace = getattr(meta, "namespace", None)
    if relation and column and namespace is None:
        if name == "not_null":
            return f"select * from {relation} where {column} is null", model
        if name == "unique":
            return (
                f"select * from {relation} where {column} in (select {column} from {relation} "
                f"where {column} is not null group by {column} having count(*) > 1)",
                model,
            )
        if name == "accepted_values" and kwargs.get("values") is not None:
            quote = kwargs.get("quote", True)
            values = ", ".join(_quote(v) if quote else str(v) for v in kwargs["values"])
            return f"select * from {relation} where {column} not in ({values})", model
        if name == "relationships" and kwargs.get("field"):
            parents = [
                nodes[n]["relation_name"]
                for n in getattr(getattr(node, "depends_on", None), "nodes", [])
                if n in nodes and n != node.attached_node and nodes[n].get("relation_name")
            ]
            if len(parents) == 1:
                return (
                    f"select * from {relation} c where c.{column} is not null and not exists "
                    f"(select 1 from {parents[0]} p where p.{kwargs['field']} = c.{column})",
                    model,
                )
    return f"select * from ({node.compiled_code}) as failing_rows", model


RULES_COLUMN = "failed_checks"
"""The column in which a ``row_checks`` test names the rules each failing row breaks."""


def _columns(con: duckdb.DuckDBPyConnection, sql: str) -> set[str]:
    cur = con.execute(f"select * from ({sql}) limit 0")
    columns = {d[0] for d in cur.description}
    cur.fetchall()
    return columns


def _broken(con: duckdb.DuckDBPyConnection, sql: str, columns: set[str]) -> list[tuple[str, int]]:
    if RULES_COLUMN not in columns:
        return []
    return con.execute(
        f"select {RULES_COLUMN}, count(*) from ({sql}) group by 1 order by 2 desc, 1"
    ).fetchall()


def _trace(
    con: duckdb.DuckDBPyConnection, sql: str, columns: set[str]
) -> tuple[int, list[tuple[str, int]]]:
    """How many rows ``sql`` returns, and how many of them each landing wrote."""
    ((offending,),) = con.execute(f"select count(*) from ({sql})").fetchall()
    if "landing_id" in columns:
        found = con.execute(
            f"select landing_id, count(*) from ({sql}) where landing_id is not null "
            "group by 1 order by 2 desc, 1"
        ).fetchall()
        return offending, found
    for table, keys in RAW_KEYS:
        if set(keys) <= columns:
            match = " and ".join(f"o.{k} is not distinct from t.{k}" for k in keys)
            found = con.execute(
                f"select t.landing_id, count(*) from raw.{table} t where exists "
                f"(select 1 from ({sql}) o where {match}) group by 1 order by 2 desc, 1"
            ).fetchall()
            return offending, found
    return offending, []


def culprits(results: Sequence[Any], warehouse: str | Path, project_dir: Path) -> list[Culprit]:
    """The failing data tests of a dbt run whose offending rows came from landings or name the
    rules they break."""
    failing = [
        r
        for r in results
        if str(getattr(r, "status", "")).lower() == "fail"
        and getattr(getattr(r, "node", None), "resource_type", None) == "test"
    ]
    if not failing:
        return []
    nodes = _manifest_nodes(project_dir)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        out = []
        for r in failing:
            sql, model = offending_sql(r.node, nodes)
            columns = _columns(con, sql)
            offending, found = _trace(con, sql, columns)
            broken = _broken(con, sql, columns)
            if not found and not broken:
                continue
            rows = {
                row[0]: dict(zip(("landing_id", "kind", "source", "started_at", "status"), row))
                for row in con.execute(
                    "select landing_id, kind, source, started_at, status from raw.landings "
                    "where landing_id in (select unnest(?::varchar[]))",
                    [[lid for lid, _ in found]],
                ).fetchall()
            }
            landings = [
                (rows.get(lid, {"landing_id": lid, "kind": "?", "source": None}), n)
                for lid, n in found
            ]
            out.append(Culprit(r.node.name, model, offending, landings, broken))
        return out
    finally:
        con.close()


def _rows(n: int) -> str:
    return f"{n} row{'s' * (n != 1)}"


def _landing_text(landing: dict[str, Any]) -> str:
    when = landing.get("started_at")
    stamp = f", {when:%Y-%m-%d %H:%M:%S}" if when is not None else ""
    return f"{landing['landing_id']} ({landing['kind']}, {landing.get('source') or 'no source'}{stamp})"


def _test_line(c: Culprit) -> str:
    return f"  - {c.test}: {_rows(c.offending)}" + (f" of {c.model}" if c.model else "")


def _broken_lines(c: Culprit) -> list[str]:
    return [f"      broken: {rules} ({_rows(n)})" for rules, n in c.broken]


def explain(found: Sequence[Culprit]) -> list[str]:
    """The lines a build failure adds: per test, the rules its rows break, the landings they
    came from and the fix."""
    lines = []
    unlanded = [c for c in found if not c.landings]
    if unlanded:
        lines.append("Rules the failing rows break:")
        for c in unlanded:
            lines.append(_test_line(c))
            lines += _broken_lines(c)
    landed = [c for c in found if c.landings]
    if not landed:
        return lines
    lines.append("Landed data fails these tests:")
    for c in landed:
        lines.append(f"{_test_line(c)}, from:")
        for landing, n in c.landings:
            lines.append(f"      landing {_landing_text(landing)}: {_rows(n)}")
        lines += _broken_lines(c)
    ids = list(dict.fromkeys(landing["landing_id"] for c in landed for landing, _ in c.landings))
    lines.append(
        "Fix: "
        + "; ".join(f"`ableaudit forget {i}`" for i in ids)
        + " removes what that landing wrote and rebuilds; correct its source and land it again."
    )
    return lines


def blame(results: Sequence[Any], warehouse: str | Path, project_dir: Path) -> list[str]:
    """``explain(culprits(...))``, or one line saying why the rows could not be traced."""
    try:
        return explain(culprits(results, warehouse, project_dir))
    except (duckdb.Error, AttributeError, KeyError) as err:
        return [f"(could not trace the failing rows to their landings: {err})"]
