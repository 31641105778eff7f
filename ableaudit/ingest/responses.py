"""Land responses made elsewhere (another harness, a hosted batch API, a colleague).

The file is validated whole before anything lands: a missing column, an unknown
query or disability, or a duplicate row stops the import with one message that
lists what is wrong, and the warehouse is left as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from ableaudit.keys import canonical_json, content_key
from ableaudit.warehouse import connect
from ableaudit.warehouse.landing import LandingReport, land_generations

REQUIRED = ("model_id", "query_id", "disability", "response_text")
OPTIONAL = ("arm", "sample_index", "temperature", "query_set", "task")


class ResponseImportError(ValueError):
    """The file cannot be imported; the message says what to fix."""


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """CSV, JSONL/NDJSON or Parquet, every column as text (types are checked below)."""
    p = Path(path)
    if not p.is_file():
        raise ResponseImportError(f"{p} does not exist")
    suffix = p.suffix.lower()
    con = duckdb.connect()
    try:
        if suffix == ".csv":
            rel = con.sql(f"select * from read_csv({_lit(p)}, header = true, all_varchar = true)")
        elif suffix in (".jsonl", ".ndjson", ".json"):
            rel = con.sql(f"select * from read_json({_lit(p)}, format = 'newline_delimited')")
        elif suffix == ".parquet":
            rel = con.sql(f"select * from read_parquet({_lit(p)})")
        else:
            raise ResponseImportError(
                f"{p}: unsupported file type {suffix!r}; use .csv, .jsonl or .parquet"
            )
        return rel.to_arrow_table().to_pylist()
    except duckdb.Error as err:
        raise ResponseImportError(f"{p} could not be read: {err}") from None
    finally:
        con.close()


def _lit(p: Path) -> str:
    return "'" + str(p).replace("'", "''") + "'"


def _disability_lookup(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """id, display name and short name (case-insensitive) -> disability id."""
    lookup: dict[str, str] = {}
    for did, display, short in con.execute(
        "select disability_id, display_name, short_name from main.stg_seeds__disabilities"
    ).fetchall():
        for name in (did, display, short):
            if name:
                lookup[name.strip().lower()] = did
    return lookup


def require_columns(
    path: str | Path,
    rows: list[dict],
    required: Sequence[str],
    optional: str,
    error: type[Exception],
) -> None:
    """Refuse a file with no rows, or without a required column, in one message naming what it has."""
    if not rows:
        raise error(f"{path} holds no rows")
    columns = set(rows[0])
    missing = [c for c in required if c not in columns]
    if missing:
        raise error(
            f"{path} lacks required column(s) {missing}; found {sorted(columns)}. "
            f"Required: {list(required)}; {optional}"
        )


def import_responses(
    path: str | Path,
    warehouse: str | Path,
    default_query_set: str = "ableaudit",
    run_id: str | None = None,
) -> LandingReport:
    rows = read_table(path)
    require_columns(path, rows, REQUIRED, f"optional: {list(OPTIONAL)}", ResponseImportError)
    con = connect(warehouse)
    try:
        tables = {
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_schema = 'main'"
            ).fetchall()
        }
        if not {"int_prompts", "stg_seeds__disabilities"} <= tables:
            raise ResponseImportError(
                f"the warehouse {warehouse} has no prompts yet; run `ableaudit build` once, then import"
            )
        lookup = _disability_lookup(con)
        prompts = {
            (qs, qid, did): (pid, domain, text)
            for pid, qs, qid, did, domain, text in con.execute(
                "select prompt_id, query_set, query_id, disability_id, domain, prompt_text from main.int_prompts"
            ).fetchall()
        }
    finally:
        con.close()

    problems: list[str] = []
    landing: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, r in enumerate(rows, start=2 if str(path).lower().endswith(".csv") else 1):
        where = f"row {i}"
        raw_dis = (r.get("disability") or "").strip()
        disability_id = None
        if raw_dis:
            disability_id = lookup.get(raw_dis.lower())
            if disability_id is None:
                problems.append(
                    f"{where}: unknown disability {raw_dis!r} (use an id such as 'hearing' or a display name)"
                )
                continue
        query_set = (r.get("query_set") or default_query_set).strip()
        query_id = str(r.get("query_id") or "").strip()
        prompt = prompts.get((query_set, query_id, disability_id))
        if prompt is None:
            problems.append(
                f"{where}: no prompt for query_set={query_set!r} query_id={query_id!r} disability={raw_dis or '(neutral)'!r}"
            )
            continue
        model_id = str(r.get("model_id") or "").strip()
        if not model_id:
            problems.append(f"{where}: empty model_id")
            continue
        try:
            sample_index = int(r.get("sample_index") or 0)
            temperature = (
                float(r["temperature"]) if r.get("temperature") not in (None, "") else None
            )
        except (TypeError, ValueError):
            problems.append(f"{where}: sample_index must be an integer and temperature a number")
            continue
        text = r.get("response_text")
        text = "" if text is None else str(text)
        arm = (r.get("arm") or "baseline").strip()
        task_name = (r.get("task") or "text").strip()
        prompt_id, domain, prompt_text = prompt
        identity = {
            "source": "import",
            "task": task_name,
            "model_id": model_id,
            "arm": arm,
            "prompt_id": prompt_id,
            "temperature": temperature,
            "sample_index": sample_index,
        }
        key = content_key(identity)
        if key in seen:
            problems.append(
                f"{where}: duplicates row {seen[key]} (same model_id, arm, query, disability, temperature, sample_index)"
            )
            continue
        seen[key] = i
        landing.append(
            {
                "generation_id": key,
                "run_id": run_id,
                "task": task_name,
                "target": model_id,
                "model_id": model_id,
                "backend": "import",
                "model_revision": None,
                "adapter": None,
                "arm": arm,
                "query_set": query_set,
                "query_id": query_id,
                "domain": domain,
                "disability_id": disability_id,
                "condition": "disability" if disability_id else "neutral",
                "prompt_id": prompt_id,
                "system_prompt": None,
                "prompt_text": prompt_text,
                "temperature": temperature,
                "top_p": None,
                "max_new_tokens": None,
                "seed": None,
                "sample_index": sample_index,
                "decoding_json": canonical_json({"temperature": temperature}),
                "status": "ok" if text.strip() else "empty",
                "finish_reason": None,
                "response_text": text,
                "error_message": None,
                "prompt_tokens": None,
                "completion_tokens": None,
                "latency_ms": None,
                "source": "imported",
            }
        )
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ResponseImportError(
            f"{path}: {len(problems)} row(s) cannot be imported; nothing was landed:\n  {shown}{more}"
        )
    return land_generations(warehouse, landing)
