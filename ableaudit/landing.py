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
from ableaudit.warehouse import connect

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


def land_generations(warehouse: str | Path, rows: Sequence[dict[str, Any]]) -> LandingReport:
    """Land rows in one transaction; see the module docstring for the rules."""
    report = LandingReport(errors=sum(1 for r in rows if r.get("status") == "error"))
    if not rows:
        return report
    bad = [r.get("status") for r in rows if r.get("status") not in ("ok", "empty", "error")]
    if bad:
        raise ValueError(f"generation status must be ok, empty or error; got {sorted(set(map(str, bad)))}")
    table = to_arrow(rows)
    cols = ", ".join(GENERATION_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in GENERATION_COLUMNS if c != "generation_id")
    con = connect(warehouse)
    try:
        con.register("incoming", table)
        con.execute("begin transaction")
        before = dict(
            con.execute(
                "select g.generation_id, g.status from raw.generations g join incoming i using (generation_id)"
            ).fetchall()
        )
        con.execute(
            f"insert into raw.generations ({cols}) select {cols} from incoming "
            f"on conflict (generation_id) do update set {updates}, created_at = now() "
            "where raw.generations.status = 'error'"
        )
        con.execute(
            "insert into raw.generation_errors (generation_id, run_id, error_message) "
            "select generation_id, run_id, error_message from incoming where status = 'error'"
        )
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise
    finally:
        con.close()
    for r in rows:
        prior = before.get(r["generation_id"])
        if prior is None:
            report.inserted += 1
        elif prior == "error":
            report.retried += 1
        else:
            report.unchanged += 1
    return report
