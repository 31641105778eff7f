"""The landing layer's writers for the query-set pipeline (``ableaudit queryset``).

Generator calls are content-addressed like audit generations (``land_keyed``: a landed
result is final, a landed error is replaced by a later attempt), so a resumed build asks
the generator nothing it has answered. What validation and review decide about a set is
reference data: each write makes the warehouse hold exactly the incoming rows for that
set, leaving identical rows (and the landing that wrote them) as they were, so a build
run again on the same inputs writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ableaudit.records import LandingReport
from ableaudit.warehouse import raw_schema
from ableaudit.warehouse.connection import connect
from ableaudit.warehouse.landing import _arrow, _landing_for, _settle, land_keyed, writing

GENERATIONS = "queryset_generations"


def land_queryset_generations(
    warehouse: str | Path, rows: Sequence[dict[str, Any]]
) -> LandingReport:
    """Land generator calls of the pipeline, keyed by ``generation_id``."""
    bad = sorted({str(r.get("status")) for r in rows} - {"ok", "empty", "error"})
    if bad:
        raise ValueError(f"generation status must be ok, empty or error; got {bad}")
    return land_keyed(
        warehouse,
        GENERATIONS,
        "generation_id",
        "status",
        raw_schema.table(GENERATIONS).arrow_columns(),
        rows,
        kind="queryset-build",
    )


def landed_queryset_generations(
    warehouse: str | Path, keys: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """The landed results (ok or empty) among ``keys``, by key; errors are not results."""
    keys = list(keys)
    if not keys:
        return {}
    con = connect(warehouse)
    try:
        con.register("wanted_keys", pa.table({"generation_id": pa.array(keys, pa.string())}))
        found = con.execute(
            f"select g.generation_id, g.status, g.response_text, g.generator_revision "
            f"from raw.{GENERATIONS} g join wanted_keys using (generation_id) "
            "where g.status in ('ok', 'empty')"
        ).fetchall()
    finally:
        con.close()
    return {k: {"status": s, "response_text": t, "generator_revision": r} for k, s, t, r in found}


def _replace_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    where: dict[str, Any],
    rows: Sequence[dict[str, Any]],
    landing_id: str,
) -> None:
    """Make ``raw.<table>`` hold exactly ``rows`` where the ``where`` columns equal their values;
    a landed row equal to an incoming one stays as it is."""
    columns = raw_schema.table(table).arrow_columns()
    compared = [c for c in columns if c != "landing_id"]
    same = " and ".join(f"e.{c} is not distinct from i.{c}" for c in compared)
    scope = " and ".join(f"e.{c} = ?" for c in where)
    params = list(where.values())
    name = f"incoming_{table}"
    con.register(name, _arrow([{**r, **where} for r in rows], columns, landing_id))
    con.execute(
        f"delete from raw.{table} e where {scope} and not exists (select 1 from {name} i where {same})",
        params,
    )
    cols = ", ".join(columns)
    con.execute(
        f"insert into raw.{table} ({cols}) select {cols} from {name} i "
        f"where not exists (select 1 from raw.{table} e where {scope} and {same})",
        params,
    )
    con.unregister(name)


def published_config(warehouse: str | Path, query_set: str) -> str | None:
    """The config a published set was built from; None when the set is not published."""
    con = connect(warehouse)
    try:
        found = con.execute(
            "select config_json from raw.queryset_builds where query_set = ? and status = 'published'",
            [query_set],
        ).fetchall()
    finally:
        con.close()
    return found[0][0] if found else None


def record_build(
    warehouse: str | Path,
    build: dict[str, Any],
    domains: Sequence[dict[str, Any]],
    candidates: Sequence[dict[str, Any]],
) -> None:
    """Land a build's provenance, its domains and every candidate with its validation decision,
    in one transaction. A published set keeps its status and publication time."""
    query_set = build["query_set"]
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "queryset-build", f"query set {query_set}")
        prior = con.execute(
            "select status, published_at, created_at from raw.queryset_builds where query_set = ?",
            [query_set],
        ).fetchall()
        row = dict(build)
        if prior:
            row.update(status=prior[0][0], published_at=prior[0][1])
        _replace_rows(con, "queryset_builds", {"query_set": query_set}, [row], landing_id)
        _replace_rows(con, "queryset_domains", {"query_set": query_set}, domains, landing_id)
        _replace_rows(con, "queryset_candidates", {"query_set": query_set}, candidates, landing_id)
        _settle(con, landing_id, own)


def land_reviews(
    warehouse: str | Path, query_set: str, rows: Sequence[dict[str, Any]], source_file: str
) -> None:
    """Make ``raw.queryset_reviews`` hold exactly ``rows`` for ``query_set`` (validated first)."""
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "queryset-review", source_file)
        batch = [{**r, "source_file": source_file} for r in rows]
        _replace_rows(con, "queryset_reviews", {"query_set": query_set}, batch, landing_id)
        _settle(con, landing_id, own)


def publish_query_set(
    warehouse: str | Path, query_set: str, prompts: Sequence[dict[str, Any]]
) -> None:
    """Make ``prompts`` the set's rows of ``raw.external_queries`` (what ``int_prompts`` reads)
    and mark the build published, in one transaction."""
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "queryset-build", f"query set {query_set}")
        batch = [{**p, "source_file": f"queryset build {query_set}"} for p in prompts]
        _replace_rows(con, "external_queries", {"query_set": query_set}, batch, landing_id)
        con.execute(
            "update raw.queryset_builds set status = 'published', "
            "published_at = coalesce(published_at, now()) where query_set = ?",
            [query_set],
        )
        _settle(con, landing_id, own)


def read_table(warehouse: str | Path, table: str, query_set: str) -> list[dict[str, Any]]:
    """The rows of ``raw.<table>`` for one set, as dicts (for review sheets and publishing)."""
    if table not in {t.name for t in raw_schema.TABLES}:
        raise ValueError(f"unknown raw table {table!r}")
    con = connect(warehouse)
    try:
        cur = con.execute(f"select * from raw.{table} where query_set = ?", [query_set])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()
