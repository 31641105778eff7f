"""Land responses made elsewhere (another harness, a hosted batch API, a colleague).

The file is validated whole before anything lands. The file itself is read by
ableaudit.ingest.files (encoding, delimiter, shape); a missing column, or one this
import does not read, is refused with the closest known name. Then an unknown
query, query set or disability (with a did-you-mean), a value the marts cannot
hold (a task other than text or vision, a negative or infinite temperature, a
sample index past int32, a response that is not text, a NUL character) or a
duplicate row stops the import with one message that lists, per field, the rows
that are wrong and how to fix them, and the warehouse is left as it was. Every later `dbt build` reads what lands here, so a
row the dbt tests would refuse must never land.

Two more rules keep the marts honest. A row whose text differs from the one
landed under the same key is refused unless the caller asks to replace it (the
old row is kept in raw.generation_history); otherwise a corrected file would be
silently ignored. And an imported row may not fall on a unit an audit already
generated (same task, model, arm, query, disability, temperature and sample),
because both would then count as pairs of that unit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ableaudit.ingest import files, response_batches
from ableaudit.ingest.response_fields import INT32_MAX as INT32_MAX
from ableaudit.ingest.response_fields import TASKS as TASKS
from ableaudit.ingest.response_fields import (
    FieldError,
    is_blank,
    parse_name,
    parse_response_text,
    parse_sample_index,
    parse_task,
    parse_temperature,
)
from ableaudit.keys import canonical_json, content_key
from ableaudit.warehouse import connect
from ableaudit.warehouse.batch_landing import land_response_batches
from ableaudit.warehouse.landing import land_imported_generations

REQUIRED = ("model_id", "query_id", "disability", "response_text")
OPTIONAL = ("arm", "sample_index", "temperature", "query_set", "task", "condition", "domain")


CONDITIONS = ("neutral", "disability")


ROWS_SHOWN = 5
"""Rows named per problem, and changed texts shown, before '... and N more'."""
TEXT_SHOWN = 60
"""Characters of an old or new text shown in a diff summary."""


class ResponseImportError(ValueError):
    """The file cannot be imported; the message says what to fix."""


@dataclass
class ImportReport:
    """What one import did to raw.generations."""

    inserted: int = 0
    """Rows landed for the first time."""
    unchanged: int = 0
    """Rows already landed with the same text, left as they were."""
    replaced: int = 0
    """Landed rows whose text the import replaced (``replace=True``); the old rows are in
    raw.generation_history."""


# --------------------------------------------------------------------------- reading


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """CSV, JSONL/NDJSON or Parquet as one dict per row (CSV cells as text; types checked below)."""
    return [row for _, row in read_numbered(path)]


def read_numbered(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(row number a user finds in the file, row): the CSV line (the header is line 1), the
    JSONL line, or the Parquet row counted from 1.

    JSONL keeps the JSON type a value was written with (an object stays an object and is
    refused, instead of being coerced into a string column); CSV cells are text. Encoding,
    delimiter and shape problems are refused by ableaudit.ingest.files.
    """
    return files.read_numbered(path, ResponseImportError)


def read_checked(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """The file's numbered rows, or ResponseImportError when the file itself is wrong (its
    encoding, its shape, a missing or unknown column): checks that need no warehouse, so the
    command line runs them before it spends a minute preparing the prompts."""
    numbered = read_numbered(path)
    rows = [r for _, r in numbered]
    require_columns(path, rows, REQUIRED, f"optional: {list(OPTIONAL)}", ResponseImportError)
    files.refuse_unknown_columns(
        path, files.columns_of(rows), (*REQUIRED, *OPTIONAL), ResponseImportError
    )
    return numbered


def require_columns(
    path: str | Path,
    rows: list[dict],
    required: Sequence[str],
    optional: str,
    error: type[Exception],
) -> None:
    """Refuse a file with no rows, or without a required column, in one message naming what it has.

    The columns are those of any row: a JSONL object may leave out a key another one has."""
    if not rows:
        raise error(f"{path} holds no rows")
    columns = {c for r in rows for c in r}
    missing = [c for c in required if c not in columns]
    if missing:
        raise error(
            f"{path} lacks required column(s) {missing}; found {sorted(columns)}. "
            f"Required: {list(required)}; {optional}"
        )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Problems:
    """Every bad value of a file, grouped by (field, fix) so one line names all rows it covers."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], list[tuple[int, str]]] = {}

    def add(self, field: str, row: int, value: Any, fix: str) -> None:
        self.groups.setdefault((field, fix), []).append((row, _shown(value)))

    def __bool__(self) -> bool:
        return bool(self.groups)

    def rows(self) -> set[int]:
        return {r for found in self.groups.values() for r, _ in found}

    def message(self, path: str | Path) -> str:
        lines = []
        for (field, fix), found in self.groups.items():
            shown = ", ".join(f"row {r} ({v})" for r, v in found[:ROWS_SHOWN])
            more = f" and {len(found) - ROWS_SHOWN} more" if len(found) > ROWS_SHOWN else ""
            lines.append(f"{field}: {shown}{more}: {fix}")
        return (
            f"{path}: {len(self.rows())} row(s) cannot be imported; nothing was landed:\n"
            + files.listed(lines)
        )


# --------------------------------------------------------------------------- validation


def validate_rows(
    path: str | Path,
    numbered: Sequence[tuple[int, dict[str, Any]]],
    disabilities: dict[str, str],
    prompts: dict[tuple[str, str, str | None], tuple[str, str, str]],
    default_query_set: str = "ableaudit",
    run_id: str | None = None,
) -> list[dict[str, Any]]:
    """Turn the file's rows into raw.generations rows, or raise one ResponseImportError
    listing every problem.

    ``disabilities``: id, display name and short name (lower case) -> disability id.
    ``prompts``: (query_set, query_id, disability_id or None) -> (prompt_id, domain, text).
    Pure, so every rule is testable without a warehouse.
    """
    problems = Problems()
    landing = list(
        checked_rows(numbered, disabilities, prompts, default_query_set, run_id, problems, {})
    )
    if problems:
        raise ResponseImportError(problems.message(path))
    return landing


def checked_rows(
    numbered: Iterable[tuple[int, dict[str, Any]]],
    disabilities: dict[str, str],
    prompts: dict[tuple[str, str, str | None], tuple[str, str, str]],
    default_query_set: str,
    run_id: str | None,
    problems: Problems,
    seen: dict[str, int],
) -> Iterator[dict[str, Any]]:
    """``validate_rows`` a part of a file at a time: each good row as raw.generations holds it,
    each problem added to ``problems``; ``seen`` (key -> row) carries over from the parts
    before, so a key twice in the file is found across parts."""
    query_ids: dict[str, set[str]] = {}
    for qs, qid, _ in prompts:
        query_ids.setdefault(qs, set()).add(qid)
    for i, r in numbered:
        before = len(problems.rows())
        for field in files.nul_fields(r):
            problems.add(field, i, r[field], "holds a NUL character (\\x00); remove it")

        def check(field: str, parse: Callable[..., Any], *args: Any, row: dict = r, n: int = i):
            try:
                return parse(row.get(field), *args)
            except FieldError as err:
                problems.add(field, n, row.get(field), str(err))
                return None

        model_id = check("model_id", parse_name, None, "model")
        arm = check("arm", parse_name, "baseline", "arm")
        query_set = check("query_set", parse_name, default_query_set, "query set")
        task_name = check("task", parse_task)
        temperature = check("temperature", parse_temperature)
        sample_index = check("sample_index", parse_sample_index)
        text = check("response_text", parse_response_text)
        bad = len(problems.rows()) > before

        raw_dis = r.get("disability")
        raw_dis = "" if raw_dis is None else str(raw_dis).strip()
        disability_id = None
        if raw_dis:
            disability_id = disabilities.get(raw_dis.lower())
            if disability_id is None:
                problems.add(
                    "disability",
                    i,
                    raw_dis,
                    "unknown disability"
                    + files.did_you_mean(raw_dis, disabilities)
                    + "; use an id such as 'hearing', a display name, or "
                    "leave it empty for the neutral query",
                )
                bad = True
        condition = "disability" if disability_id else "neutral"
        given_condition = r.get("condition")
        if not is_blank(given_condition) and not bad:
            if str(given_condition).strip().lower() != condition:
                problems.add(
                    "condition",
                    i,
                    given_condition,
                    "must agree with disability: 'neutral' when disability is empty, "
                    "'disability' otherwise (or drop the column)",
                )
                bad = True
        if bad:
            continue
        query_id = str(r.get("query_id") or "").strip()
        prompt = prompts.get((query_set, query_id, disability_id))
        if prompt is None:
            if query_set not in query_ids:
                field, value = "query_set", query_set
                fix = (
                    "no such query set in the warehouse"
                    + files.did_you_mean(query_set, query_ids)
                    + f"; use one of {sorted(query_ids)}, or land the set first with "
                    "`ableaudit import queries`"
                )
            elif query_id not in query_ids[query_set]:
                field, value = "query_id", query_id
                fix = (
                    f"no such query in query set {query_set!r}"
                    + files.did_you_mean(query_id, query_ids[query_set])
                    + "; use a query id of the set (e.g. 'edu_001' of 'ableaudit')"
                )
            else:
                field, value = "disability", f"{query_id}:{disability_id}"
                fix = (
                    f"query set {query_set!r} does not ask this query for this disability; "
                    "check the disability, or leave it empty for the neutral query"
                )
            problems.add(field, i, value, fix)
            continue
        prompt_id, domain, prompt_text = prompt
        given_domain = r.get("domain")
        if not is_blank(given_domain) and str(given_domain).strip().lower() != domain:
            problems.add(
                "domain",
                i,
                given_domain,
                f"must be the query's own domain, {domain!r} (or drop the column)",
            )
            continue
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
            problems.add(
                "row",
                i,
                f"{query_set}:{query_id}",
                f"duplicates row {seen[key]} (same model_id, arm, query, disability, "
                "temperature, sample_index); keep one, or give them distinct sample_index values",
            )
            continue
        seen[key] = i
        yield (
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
                "condition": condition,
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
                "_row": i,
            }
        )


UNIT = ("task", "model_id", "arm", "query_set", "query_id", "disability_id", "temperature")


def _unit(r: dict[str, Any]) -> tuple:
    return (*(r[c] for c in UNIT), r["sample_index"])


def _rows_named(rows: Sequence[int], total: int) -> str:
    shown = ", ".join(str(n) for n in rows[:ROWS_SHOWN])
    more = f" and {total - ROWS_SHOWN} more" if total > ROWS_SHOWN else ""
    return f"{shown}{more}"


def refuse_generated_units(
    path: str | Path, landing: Sequence[dict[str, Any]], generated: set[tuple]
) -> None:
    """Refuse rows on a unit an audit generated: both rows would form a pair of that unit. A
    row without a temperature meets every generated temperature of its unit."""
    at = UNIT.index("temperature")
    any_temperature = {(*u[:at], *u[at + 1 :]) for u in generated}
    clash = [
        r
        for r in landing
        if _unit(r) in generated
        or (r["temperature"] is None and (*_unit(r)[:at], *_unit(r)[at + 1 :]) in any_temperature)
    ]
    if clash:
        generated_units_refused(
            path, [r["_row"] for r in clash], len(clash), {r["model_id"] for r in clash}
        )


def generated_units_refused(
    path: str | Path, rows: Sequence[int], total: int, model_ids: Iterable[str]
) -> None:
    """The message of ``refuse_generated_units``: ``rows``, the first rows of ``total``."""
    if total:
        models = sorted(model_ids)
        raise ResponseImportError(
            f"{path}: {total} row(s) cannot be imported; nothing was landed:\n  "
            f"model_id: rows {_rows_named(rows, total)}: an audit already generated responses for "
            f"the same unit (task, model_id {', '.join(map(repr, models))}, arm, query, "
            "disability, temperature, sample_index), so both would be counted; import under "
            f"a distinct model_id (e.g. {models[0] + '-imported'!r})"
        )


def _clip(text: str | None) -> str:
    if text is None:
        return "null"
    text = text.replace("\n", " ")
    return repr(text if len(text) <= TEXT_SHOWN else text[: TEXT_SHOWN - 3] + "...")


def changed_texts(
    landing: Sequence[dict[str, Any]], landed: dict[str, str | None]
) -> list[tuple[dict[str, Any], str | None]]:
    """(incoming row, landed text) for every row whose key is landed with another text."""
    return [
        (r, landed[r["generation_id"]])
        for r in landing
        if r["generation_id"] in landed and (landed[r["generation_id"]] or "") != r["response_text"]
    ]


def refuse_changed(
    path: str | Path, changed: Sequence[tuple[dict[str, Any], str | None]], total: int | None = None
) -> None:
    """One message summarising the texts a re-import would change, and how to replace them
    (``total``: how many there are, when ``changed`` holds only the first)."""
    total = len(changed) if total is None else total
    lines = [
        f"row {r['_row']} [{r['generation_id'][:12]} {r['model_id']} {r['prompt_id']} "
        f"sample {r['sample_index']}]: landed {_clip(old)} -> file {_clip(r['response_text'])}"
        for r, old in changed[:ROWS_SHOWN]
    ]
    more = [f"... and {total - ROWS_SHOWN} more"] if total > ROWS_SHOWN else []
    raise ResponseImportError(
        f"{path}: {total} row(s) are already landed with a different response_text; "
        "nothing was landed:\n  "
        + "\n  ".join(lines + more)
        + "\nRe-run with --replace to supersede the landed texts (the old rows are kept in "
        "raw.generation_history), or fix the file if the landed texts are right."
    )


# --------------------------------------------------------------------------- the import


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


def check_file(path: str | Path) -> response_batches.Source:
    """The file, ready to be read a batch at a time, or ResponseImportError when the file
    itself is wrong (its encoding, its shape, a missing or unknown column): checks that need
    no warehouse, so the command line runs them before it prepares the prompts. A Parquet
    file is not read here, only its schema; a CSV or JSONL file is read whole."""
    if Path(path).suffix.lower() == ".parquet":
        source = response_batches.open_parquet(path, ResponseImportError)
        if not source.rows:
            raise ResponseImportError(f"{path} holds no rows")
        _require(path, source.columns, REQUIRED, f"optional: {list(OPTIONAL)}")
    else:
        numbered = read_checked(path)
        source = response_batches.from_numbered(numbered)
    files.refuse_unknown_columns(path, source.columns, (*REQUIRED, *OPTIONAL), ResponseImportError)
    return source


def _require(path: str | Path, columns: Sequence[str], required: Sequence[str], optional: str):
    missing = [c for c in required if c not in columns]
    if missing:
        raise ResponseImportError(
            f"{path} lacks required column(s) {missing}; found {sorted(columns)}. "
            f"Required: {list(required)}; {optional}"
        )


def _warehouse_lookups(
    warehouse: str | Path,
) -> tuple[dict[str, str], dict[tuple[str, str, str | None], tuple[str, str, str]]]:
    """(disability lookup, prompts) of the warehouse, as ``validate_rows`` takes them."""
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
        disabilities = _disability_lookup(con)
        prompts = {
            (qs, qid, did): (pid, domain, text)
            for pid, qs, qid, did, domain, text in con.execute(
                "select prompt_id, query_set, query_id, disability_id, domain, prompt_text "
                "from main.int_prompts"
            ).fetchall()
        }
    finally:
        con.close()
    return disabilities, prompts


def import_responses(
    path: str | Path,
    warehouse: str | Path,
    default_query_set: str = "ableaudit",
    run_id: str | None = None,
    replace: bool = False,
    batch_rows: int = response_batches.BATCH_ROWS,
) -> ImportReport:
    """Validate the whole file against the warehouse's prompts, then land it, or land nothing.

    ``replace``: rows already landed under the same key with another text supersede
    the landed row (kept in raw.generation_history) instead of being refused.

    The file goes through Arrow record batches of ``batch_rows`` rows, checked and keyed
    a batch at a time, staged on disk, then landed in one transaction
    (``response_batches``, ``batch_landing.land_response_batches``);
    a file whose columns Arrow cannot carry as they are (an object, a list, a mix of
    types) is checked and landed row by row. Either way a refused row is named by the
    row-by-row checks.
    """
    source = check_file(path)
    if source.batches is None:
        numbered = [row for part in source.numbered() for row in part]
        return _import_rows(path, warehouse, numbered, default_query_set, run_id, replace)
    disabilities, prompts = _warehouse_lookups(warehouse)
    if batch_rows != response_batches.BATCH_ROWS:
        source = _rebatched(path, source, batch_rows)
    out = land_response_batches(
        warehouse,
        source.batches(),
        run_id=run_id,
        replace=replace,
        prepare=lambda b: response_batches.normalise(b, disabilities, prompts, default_query_set),
    )
    if out.refused:
        problems, seen = Problems(), {}
        for part in source.numbered():
            for _ in checked_rows(
                part, disabilities, prompts, default_query_set, run_id, problems, seen
            ):
                pass
        if problems:
            raise ResponseImportError(problems.message(path))
        raise RuntimeError(  # the batch rules refused a row the row rules accept: a bug
            f"{path}: the batch checks refused a row the row checks accept; please report it"
        )
    generated_units_refused(path, out.clash_rows, out.clashes, out.clash_models)
    if out.changed and not replace:
        refuse_changed(path, out.changed_shown, out.changed)
    return ImportReport(inserted=out.inserted, unchanged=out.unchanged, replaced=out.replaced)


def _rebatched(path: str | Path, source: response_batches.Source, batch_rows: int):
    if Path(path).suffix.lower() == ".parquet":
        return response_batches.open_parquet(path, ResponseImportError, batch_rows)
    numbered = [row for part in source.numbered() for row in part]
    return response_batches.from_numbered(numbered, batch_rows)


def _import_rows(
    path: str | Path,
    warehouse: str | Path,
    numbered: list[tuple[int, dict[str, Any]]],
    default_query_set: str,
    run_id: str | None,
    replace: bool,
) -> ImportReport:
    """The import row by row: a Python dict per row (files Arrow cannot carry as they are)."""
    disabilities, prompts = _warehouse_lookups(warehouse)
    landing = validate_rows(path, numbered, disabilities, prompts, default_query_set, run_id)
    con = connect(warehouse)
    try:
        con.register(
            "import_keys",
            pa.table(
                {
                    "generation_id": pa.array([r["generation_id"] for r in landing], pa.string()),
                    "model_id": pa.array([r["model_id"] for r in landing], pa.string()),
                }
            ),
        )
        landed = dict(
            con.execute(
                "select g.generation_id, g.response_text from raw.generations g "
                "join import_keys using (generation_id)"
            ).fetchall()
        )
        generated = set(
            con.execute(
                f"select distinct {', '.join('g.' + c for c in UNIT)}, g.sample_index "
                "from raw.generations g "
                "where g.source = 'generated' "
                "and g.model_id in (select distinct model_id from import_keys)"
            ).fetchall()
        )
    finally:
        con.close()

    refuse_generated_units(path, landing, generated)
    changed = changed_texts(landing, landed)
    if changed and not replace:
        refuse_changed(path, changed)
    rows = [{k: v for k, v in r.items() if k != "_row"} for r in landing]
    report, replaced = land_imported_generations(
        warehouse, rows, supersede=[r["generation_id"] for r, _ in changed]
    )
    return ImportReport(inserted=report.inserted, unchanged=report.unchanged, replaced=replaced)
