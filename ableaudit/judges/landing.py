"""The one place where judge verdicts enter the warehouse (raw.judgments).

The rules are those of ``ableaudit.landing`` for generations: a row is keyed by
its content-addressed ``judgment_id``; a landed row with ``call_status = 'ok'``
is never replaced (whatever its parse status: an unparseable verdict is the
judge's real answer and is kept, not re-asked); a row with ``call_status =
'error'`` is replaced by a later attempt. So errors are retried and never cached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import pyarrow as pa

from ableaudit.landing import LandingReport, land_keyed
from ableaudit.warehouse import connect

JUDGMENT_COLUMNS: dict[str, pa.DataType] = {
    "judgment_id": pa.string(),
    "judge_kind": pa.string(),
    "judge_name": pa.string(),
    "judge_model": pa.string(),
    "judge_revision": pa.string(),
    "prompt_version": pa.string(),
    "generation_id": pa.string(),
    "neutral_generation_id": pa.string(),
    "disability_generation_id": pa.string(),
    "subject_hash": pa.string(),
    "raw_output": pa.string(),
    "call_status": pa.string(),
    "parse_status": pa.string(),
    "parsed_json": pa.string(),
    "parse_notes": pa.string(),
    "error_message": pa.string(),
    "source": pa.string(),
    "run_id": pa.string(),
}

CALL_STATUSES = ("ok", "error")


def _check(rows: Sequence[dict[str, Any]]) -> None:
    problems = []
    for r in rows:
        cs, ps = r.get("call_status"), r.get("parse_status")
        if cs not in CALL_STATUSES:
            problems.append(f"{r.get('judgment_id')}: call_status {cs!r} is not ok|error")
        elif cs == "error" and (ps is not None or r.get("parsed_json") is not None):
            problems.append(f"{r.get('judgment_id')}: an error row has no parse result")
        elif cs == "ok" and ps not in ("parsed", "repaired", "unparseable"):
            problems.append(f"{r.get('judgment_id')}: parse_status {ps!r} is not parsed|repaired|unparseable")
        elif ps == "unparseable" and r.get("parsed_json") is not None:
            problems.append(f"{r.get('judgment_id')}: an unparseable verdict cannot carry parsed_json")
        if r.get("judge_kind") not in ("rubric", "contrastive"):
            problems.append(f"{r.get('judgment_id')}: judge_kind {r.get('judge_kind')!r}")
    if problems:
        raise ValueError("judgment rows break the landing rules: " + "; ".join(problems[:10]))


def landed_judgment_keys(warehouse: str | Path, keys: Iterable[str]) -> set[str]:
    """Keys already landed with call_status 'ok' (a cache hit); errors are not 'done'."""
    keys = list(keys)
    if not keys:
        return set()
    con = connect(warehouse)
    try:
        con.register("wanted_keys", pa.table({"judgment_id": pa.array(keys, pa.string())}))
        found = con.execute(
            "select j.judgment_id from raw.judgments j join wanted_keys w using (judgment_id) where j.call_status = 'ok'"
        ).fetchall()
        return {k for (k,) in found}
    finally:
        con.close()


def land_judgments(warehouse: str | Path, rows: Sequence[dict[str, Any]]) -> LandingReport:
    """Land verdict rows in one transaction; see the module docstring for the rules."""
    if rows:
        _check(rows)
    return land_keyed(warehouse, "judgments", "judgment_id", "call_status", JUDGMENT_COLUMNS, rows)
