"""The one place where generations enter the warehouse.

Landing is append-only and idempotent: a row is keyed by its generation_id; a
landed 'ok' or 'empty' row is never replaced, a landed 'error' row is replaced by
a later attempt (and every failed attempt is kept in raw.generation_errors), so
errors are retried but never cached as results.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import pyarrow as pa

from ableaudit.backends.base import GenerationResult
from ableaudit.planning import PlannedGeneration
from ableaudit.warehouse import WRITE_LOCK, connect

GENERATION_COLUMNS: dict[str, pa.DataType] = {
    "generation_id": pa.string(),
    "run_id": pa.string(),
    "task": pa.string(),
    "target": pa.string(),
    "model_id": pa.string(),
    "backend": pa.string(),
    "model_revision": pa.string(),
    "adapter": pa.string(),
    "arm": pa.string(),
    "query_set": pa.string(),
    "query_id": pa.string(),
    "domain": pa.string(),
    "disability_id": pa.string(),
    "condition": pa.string(),
    "prompt_id": pa.string(),
    "system_prompt": pa.string(),
    "prompt_text": pa.string(),
    "temperature": pa.float64(),
    "top_p": pa.float64(),
    "max_new_tokens": pa.int32(),
    "seed": pa.int64(),
    "sample_index": pa.int32(),
    "decoding_json": pa.string(),
    "status": pa.string(),
    "finish_reason": pa.string(),
    "response_text": pa.string(),
    "error_message": pa.string(),
    "prompt_tokens": pa.int32(),
    "completion_tokens": pa.int32(),
    "latency_ms": pa.float64(),
    "source": pa.string(),
}

DONE_STATUSES = ("ok", "empty")


@dataclass
class LandingReport:
    inserted: int = 0           # new keys
    retried: int = 0            # error rows replaced by a new attempt
    unchanged: int = 0          # already landed as ok/empty: left as they were
    errors: int = 0             # rows of this batch with status 'error'

    def __iadd__(self, other: "LandingReport") -> "LandingReport":
        for f in ("inserted", "retried", "unchanged", "errors"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        return self


def result_row(plan: PlannedGeneration, result: GenerationResult, run_id: str | None, source: str = "generated") -> dict[str, Any]:
    if result.key != plan.generation_id:
        raise ValueError(f"result for {result.key} does not belong to planned generation {plan.generation_id}")
    row = plan.as_row()
    row.update(
        run_id=run_id,
        status=result.status,
        finish_reason=result.finish_reason,
        response_text=result.text if result.status != "error" else None,
        error_message=result.error,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        latency_ms=result.latency_ms,
        source=source,
    )
    return row


def to_arrow(rows: Sequence[dict[str, Any]]) -> pa.Table:
    schema = pa.schema(list(GENERATION_COLUMNS.items()))
    return pa.Table.from_pylist([{c: r.get(c) for c in GENERATION_COLUMNS} for r in rows], schema=schema)


def landed_keys(warehouse: str | Path, keys: Iterable[str]) -> set[str]:
    """Keys already landed as a result (ok or empty); errors are not 'done'."""
    keys = list(keys)
    if not keys:
        return set()
    con = connect(warehouse)
    try:
        wanted = pa.table({"generation_id": pa.array(keys, pa.string())})
        con.register("wanted_keys", wanted)
        found = con.execute(
            "select g.generation_id from raw.generations g join wanted_keys w using (generation_id) "
            "where g.status in ('ok', 'empty')"
        ).fetchall()
        return {k for (k,) in found}
    finally:
        con.close()


def land_keyed(
    warehouse: str | Path,
    table: str,
    key: str,
    status_column: str,
    columns: dict[str, pa.DataType],
    rows: Sequence[dict[str, Any]],
    also: Sequence[str] = (),
) -> LandingReport:
    """Land rows into ``raw.<table>`` in one transaction, keyed by ``key``.

    The rule shared by every raw table a run writes: a landed row is final unless
    its ``status_column`` says 'error', in which case a later attempt replaces it.
    Within one batch the first non-error row of a key wins. ``also`` holds extra
    statements run in the same transaction over the batch, registered as
    ``incoming``.
    """
    report = LandingReport(errors=sum(1 for r in rows if r.get(status_column) == "error"))
    if not rows:
        return report
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        prior = seen.get(r[key])
        if prior is None or (prior.get(status_column) == "error" and r.get(status_column) != "error"):
            seen[r[key]] = r
    unique = list(seen.values())
    schema = pa.schema(list(columns.items()))
    batch = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in unique], schema=schema)
    cols = ", ".join(columns)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != key)
    with WRITE_LOCK:  # threads of this process take turns writing
        con = connect(warehouse)
        try:
            con.register("incoming", batch)
            con.execute("begin transaction")
            before = dict(
                con.execute(f"select t.{key}, t.{status_column} from raw.{table} t join incoming i using ({key})").fetchall()
            )
            con.execute(
                f"insert into raw.{table} ({cols}) select {cols} from incoming "
                f"on conflict ({key}) do update set {updates}, created_at = now() "
                f"where raw.{table}.{status_column} = 'error'"
            )
            for statement in also:
                con.execute(statement)
            con.execute("commit")
        except Exception:
            con.execute("rollback")
            raise
        finally:
            con.close()
    for r in unique:
        prior = before.get(r[key])
        if prior is None:
            report.inserted += 1
        elif prior == "error":
            report.retried += 1
        else:
            report.unchanged += 1
    report.unchanged += len(rows) - len(unique)
    return report


def land_generations(warehouse: str | Path, rows: Sequence[dict[str, Any]]) -> LandingReport:
    """Land generation rows; every failed attempt is also kept in raw.generation_errors."""
    bad = [r.get("status") for r in rows if r.get("status") not in ("ok", "empty", "error")]
    if bad:
        raise ValueError(f"generation status must be ok, empty or error; got {sorted(set(map(str, bad)))}")
    return land_keyed(
        warehouse, "generations", "generation_id", "status", GENERATION_COLUMNS, rows,
        also=[
            "insert into raw.generation_errors (generation_id, run_id, error_message) "
            "select generation_id, run_id, error_message from incoming where status = 'error'"
        ],
    )
