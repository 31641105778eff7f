"""The landing layer: the only code that writes ``raw.*``.

Every write takes the process-wide write lock (threads of one audit take turns)
and runs in one transaction, so a failure lands nothing of its batch.

Generations and verdicts are append-only and idempotent: a row is keyed by a
content hash; a landed result is never replaced, a landed error is replaced by
a later attempt (every failed generation attempt is also kept in
raw.generation_errors), so errors are retried but never cached as results. The
one exception is an import the user asked to replace (``import responses
--replace``): the landed row is copied into raw.generation_history first.
Reference data (query sets, image sets, annotations, adapters, runs) is
validated by its ingest module first and written here.

Every write belongs to a landing (raw.landings) and stamps its ``landing_id`` on
the rows it writes: an audit run's landing (found by the rows' run id), the one a
caller opened with ``recording`` (an import: its kind, file and file digest), or
else a landing of its own. A row left as it was keeps the landing that wrote it.
``forget`` removes one landing's rows, putting back the rows it superseded.

This module holds those rules and the writers of generations, verdicts and text scores;
beside it, on its primitives: ``batch_landing`` (an import's batches, staged on threads),
``run_lease`` (the audit run that holds the warehouse), ``reference_landing`` (query sets,
image sets, ratings, adapters), ``forgetting`` (``history`` and ``forget``) and
``queryset_landing`` (the query-set pipeline).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ableaudit.records import GenerationResult, LandingReport, PlannedGeneration
from ableaudit.redaction import redactor
from ableaudit.warehouse import raw_schema
from ableaudit.warehouse.connection import WRITE_LOCK, connect

GENERATION_COLUMNS: dict[str, pa.DataType] = raw_schema.table("generations").arrow_columns()
JUDGMENT_COLUMNS: dict[str, pa.DataType] = raw_schema.table("judgments").arrow_columns()


def result_row(
    plan: PlannedGeneration, result: GenerationResult, run_id: str | None, source: str = "generated"
) -> dict[str, Any]:
    if result.key != plan.generation_id:
        raise ValueError(
            f"result for {result.key} does not belong to planned generation {plan.generation_id}"
        )
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
    if result.model_revision:
        row["model_revision"] = result.model_revision
    return row


def to_arrow(rows: Sequence[dict[str, Any]]) -> pa.Table:
    return _arrow(rows, GENERATION_COLUMNS)


def _arrow(
    rows: Sequence[dict[str, Any]],
    columns: dict[str, pa.DataType],
    landing_id: str | None = None,
) -> pa.Table:
    """Rows as Arrow in the declared schema; ``landing_id`` stamps every row; the texts a
    server or a judge wrote (``REDACTED_COLUMNS``) pass ``redaction``."""
    schema = pa.schema(list(columns.items()))
    stamp = {"landing_id": landing_id} if landing_id is not None else {}
    redact = redactor()
    return pa.Table.from_pylist(
        [
            {c: redact(r.get(c)) if c in REDACTED_COLUMNS else r.get(c) for c in columns} | stamp
            for r in rows
        ],
        schema=schema,
    )


REDACTED_COLUMNS = frozenset({"error_message", "raw_output", "config_json", "source"})
"""The raw columns whose text may echo a key (a server's error, a judge's text, a run's config,
a landing's source): redacted as they land (``ableaudit.redaction``)."""


# --------------------------------------------------------------------------- landings


@dataclass
class Recording:
    """A landing a caller opened with ``recording``: every write inside the block stamps its id."""

    landing_id: str
    """The id its rows carry."""
    kind: str
    """'import-responses', 'judge', ... (raw.landings.kind)."""
    source: str | None
    """The file, folder or run it came from."""
    source_sha256: str | None
    """Of the file's bytes, when the source is a file."""
    run_id: str | None
    """The run its rows name, if any."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows it wrote per raw table, once it has ended (empty when it wrote nothing)."""
    wrote: bool = False
    """Whether a write of the block reached the warehouse (its raw.landings row exists)."""


_CURRENT: ContextVar[Recording | None] = ContextVar("ableaudit_landing", default=None)


def new_landing_id() -> str:
    return uuid.uuid4().hex[:12]


@contextmanager
def recording(
    warehouse: str | Path | None,
    kind: str,
    source: str | Path | None = None,
    file: str | Path | None = None,
    run_id: str | None = None,
) -> Iterator[Recording]:
    """Make every write of the block one landing of ``kind`` from ``source`` (``file``: a file
    whose digest is kept). Its raw.landings row appears with the first write, so a refused
    import leaves no landing; it ends 'landed', or 'failed' when the block raises."""
    from ableaudit.media import file_sha256

    digest = file_sha256(file) if file is not None and Path(file).is_file() else None
    current = Recording(new_landing_id(), kind, _text(source), digest, run_id)
    token = _CURRENT.set(current)
    status = "failed"
    try:
        yield current
        status = "landed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        _CURRENT.reset(token)
        if current.wrote:
            with writing(warehouse) as con:
                current.rows = _finish(con, current.landing_id, status, only_running=True)
                if status == "landed" and not current.rows:
                    # every row had landed already: no landing, and the raw layer as it was
                    con.execute(
                        "delete from raw.landings where landing_id = ?", [current.landing_id]
                    )


def _text(value: str | Path | None) -> str | None:
    if value is None:
        return None
    return str(Path(value).expanduser().resolve()) if isinstance(value, Path) else str(value)


def _landing_for(
    con: duckdb.DuckDBPyConnection, kind: str, source: str | None, run_id: str | None = None
) -> tuple[str, bool]:
    """The landing a write belongs to, and whether the write is a landing of its own (it
    settles it in its transaction): the caller's ``recording``, else the audit run named by
    ``run_id``, else a new one."""
    current = _CURRENT.get()
    if current is not None:
        con.execute(
            "insert into raw.landings (landing_id, kind, source, source_sha256, run_id, status) "
            "values (?, ?, ?, ?, ?, 'running') on conflict (landing_id) do nothing",
            [
                current.landing_id,
                current.kind,
                current.source,
                current.source_sha256,
                current.run_id or run_id,
            ],
        )
        current.wrote = True
        return current.landing_id, False
    if run_id is not None:
        found = con.execute(
            "select landing_id from raw.landings where run_id = ? and kind = 'audit'", [run_id]
        ).fetchall()  # fetchall: DuckDB 2 refuses new work while a result is half read
        if found:
            return found[0][0], False
    landing_id = new_landing_id()
    con.execute(
        "insert into raw.landings (landing_id, kind, source, run_id, status) "
        "values (?, ?, ?, ?, 'running')",
        [landing_id, kind, source if source is not None else _run_source(run_id), run_id],
    )
    return landing_id, True


def _run_source(run_id: str | None) -> str | None:
    return f"run {run_id}" if run_id else None


def _one_run(rows: Sequence[dict[str, Any]]) -> str | None:
    runs = {r.get("run_id") for r in rows}
    return runs.pop() if len(runs) == 1 else None


def _counts(con: duckdb.DuckDBPyConnection, landing_id: str) -> dict[str, int]:
    """Rows a landing has in each raw table; 'superseded': landed rows it replaced."""
    parts = [
        f"select '{t.name}', count(*) from raw.{t.name} where landing_id = $id"
        for t in raw_schema.STAMPED
        if t.name != "generation_history"
    ]
    parts.append(
        "select 'superseded', count(*) from raw.generation_history "
        "where replaced_by_landing_id = $id"
    )
    rows = con.execute(" union all ".join(parts), {"id": landing_id}).fetchall()
    return {name: int(n) for name, n in rows if n}


def _finish(
    con: duckdb.DuckDBPyConnection, landing_id: str, status: str, only_running: bool = False
) -> dict[str, int]:
    """End a landing: its status, when, and what it wrote."""
    counts = _counts(con, landing_id)
    total = sum(n for name, n in counts.items() if name != "superseded")
    con.execute(
        "update raw.landings set status = ?, finished_at = now(), rows_json = ?, row_count = ? "
        "where landing_id = ?" + (" and status = 'running'" if only_running else ""),
        [status, json.dumps(counts, sort_keys=True), total, landing_id],
    )
    return counts


def _settle(con: duckdb.DuckDBPyConnection, landing_id: str, own: bool) -> None:
    if own:
        _finish(con, landing_id, "landed")


@contextmanager
def writing(warehouse: str | Path | None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection inside one transaction, holding the write lock: committed when the
    block ends, rolled back (nothing written) when it raises."""
    with WRITE_LOCK:
        con = connect(warehouse)
        try:
            con.execute("begin transaction")
            try:
                yield con
            except BaseException:
                con.execute("rollback")
                raise
            con.execute("commit")
        finally:
            con.close()


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
    also: Sequence[str | tuple[str, dict[str, Any]]] = (),
    kind: str | None = None,
) -> LandingReport:
    """Land rows into ``raw.<table>`` in one transaction, keyed by ``key``.

    The rule shared by every raw table a run writes: a landed row is final unless
    its ``status_column`` says 'error', in which case a later attempt replaces it.
    Within one batch the first non-error row of a key wins. ``also`` holds extra
    statements (or statements with their parameters) run in the same transaction over the
    batch, registered as ``incoming``. The rows carry their landing's id (``kind``: the kind of a landing of
    their own, when no recording or audit run holds them).
    """
    report = LandingReport(errors=sum(1 for r in rows if r.get(status_column) == "error"))
    if not rows:
        return report
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        prior = seen.get(r[key])
        if prior is None or (
            prior.get(status_column) == "error" and r.get(status_column) != "error"
        ):
            seen[r[key]] = r
    unique = list(seen.values())
    cols = ", ".join(columns)
    updates = ", ".join(f"{c} = i.{c}" for c in columns if c != key)
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, kind or table, None, _one_run(unique))
        con.register("incoming", _arrow(unique, columns, landing_id))
        before = dict(
            con.execute(
                f"select t.{key}, t.{status_column} from raw.{table} t join incoming i using ({key})"
            ).fetchall()
        )
        # by the key, not by a primary key's conflict: raw.generations has none
        # (raw_schema.UNINDEXED_KEYS); a landed error is replaced, anything else kept
        con.execute(
            f"update raw.{table} as t set {updates}, created_at = now() from incoming i "
            f"where t.{key} = i.{key} and t.{status_column} = 'error'"
        )
        con.execute(
            f"insert into raw.{table} ({cols}) select {cols} from incoming i "
            f"where not exists (select 1 from raw.{table} t where t.{key} = i.{key})"
        )
        for statement in also:
            con.execute(*((statement,) if isinstance(statement, str) else statement))
        _settle(con, landing_id, own)
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
        raise ValueError(
            f"generation status must be ok, empty or error; got {sorted(set(map(str, bad)))}"
        )
    return land_keyed(
        warehouse,
        "generations",
        "generation_id",
        "status",
        GENERATION_COLUMNS,
        rows,
        also=[
            "insert into raw.generation_errors (generation_id, run_id, error_message, landing_id) "
            "select generation_id, run_id, error_message, landing_id from incoming "
            "where status = 'error'",
            # a run's lease: it landed something just now
            "update raw.runs set heartbeat_at = now() where status = 'running' "
            "and run_id in (select distinct run_id from incoming)",
        ],
    )


def land_imported_generations(
    warehouse: str | Path, rows: Sequence[dict[str, Any]], supersede: Iterable[str] = ()
) -> tuple[LandingReport, int]:
    """Land imported generation rows in one transaction; returns the report and how many
    landed rows were superseded.

    A new key is inserted and a landed one is left as it is, except the keys in
    ``supersede``: the user re-imported them with a corrected text and asked to
    replace, so the landed row is first copied into raw.generation_history (with its
    landing, and the one replacing it) and then overwritten by the incoming one (the key
    stays, so later re-imports find it).
    """
    if not rows:
        return LandingReport(), 0
    if len({r["generation_id"] for r in rows}) != len(rows):  # the key is not indexed
        raise ValueError("imported generations repeat a generation_id; land each row once")
    replace = sorted(set(supersede))
    cols = ", ".join(GENERATION_COLUMNS)
    updates = ", ".join(f"{c} = i.{c}" for c in GENERATION_COLUMNS if c != "generation_id")
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "import-responses", None, _one_run(rows))
        con.register("incoming", _arrow(rows, GENERATION_COLUMNS, landing_id))
        ((present,),) = con.execute(
            "select count(*) from raw.generations join incoming using (generation_id)"
        ).fetchall()
        if replace:
            con.register("superseded", pa.table({"generation_id": pa.array(replace, pa.string())}))
            con.execute(
                "insert into raw.generation_history (generation_id, run_id, status, response_text, "
                "source, landed_at, replaced_by_run_id, landing_id, replaced_by_landing_id) "
                "select g.generation_id, g.run_id, g.status, g.response_text, g.source, "
                "g.created_at, i.run_id, g.landing_id, i.landing_id from raw.generations g "
                "join incoming i using (generation_id) join superseded using (generation_id)"
            )
            con.execute(
                f"update raw.generations as g set {updates}, created_at = now() from incoming i "
                "where g.generation_id = i.generation_id "
                "and g.generation_id in (select generation_id from superseded)"
            )
        con.execute(
            f"insert into raw.generations ({cols}) select {cols} from incoming i "
            "where not exists (select 1 from raw.generations g "
            "where g.generation_id = i.generation_id)"
        )
        _settle(con, landing_id, own)
    report = LandingReport(inserted=len(rows) - present, unchanged=present - len(replace))
    return report, len(replace)


# --------------------------------------------------------------------------- judgments

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
            problems.append(
                f"{r.get('judgment_id')}: parse_status {ps!r} is not parsed|repaired|unparseable"
            )
        elif ps == "unparseable" and r.get("parsed_json") is not None:
            problems.append(
                f"{r.get('judgment_id')}: an unparseable verdict cannot carry parsed_json"
            )
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
    """Land verdict rows in one transaction; see the module docstring for the rules.

    A row's ``dimension_set`` (not a column: the definition of a user's dimension set, as
    JSON) lands in raw.judge_dimension_sets in the same transaction and landing as the
    verdicts of that set that the landing wrote.
    """
    if rows:
        _check(rows)
    sets = {r["prompt_version"]: r["dimension_set"] for r in rows if r.get("dimension_set")}
    also = []
    if sets:
        also.append(
            (
                "insert into raw.judge_dimension_sets (prompt_version, dimension_set, definition, "
                "landing_id) select s.prompt_version, json_extract_string(s.definition, '$.name'), "
                "s.definition, j.landing_id from (select unnest($versions::varchar[]) as "
                "prompt_version, unnest($definitions::varchar[]) as definition) s "
                "join (select distinct j.prompt_version, j.landing_id from raw.judgments j "
                "join incoming i using (judgment_id) where j.landing_id = i.landing_id) j "
                "using (prompt_version) where not exists (select 1 from raw.judge_dimension_sets "
                "t where t.prompt_version = s.prompt_version and t.landing_id = j.landing_id)",
                {"versions": list(sets), "definitions": list(sets.values())},
            )
        )
    return land_keyed(
        warehouse, "judgments", "judgment_id", "call_status", JUDGMENT_COLUMNS, rows, also=also
    )


def update_judgment_parses(
    warehouse: str | Path, changed: Sequence[tuple[str, str | None, str | None, str]]
) -> None:
    """Rewrite (parse_status, parsed_json, parse_notes) of landed verdicts, keyed by judgment_id
    (the judge's own text is never changed)."""
    if not changed:
        return
    with writing(warehouse) as con:
        con.executemany(
            "update raw.judgments set parse_status = ?, parsed_json = ?, parse_notes = ? "
            "where judgment_id = ?",
            list(changed),
        )


# --------------------------------------------------------------------------- text scores


def land_text_scores(warehouse: str | Path | None, scores: pa.Table) -> LandingReport:
    """Land per-text scores (``raw.text_scores`` columns, as Arrow) in one transaction.

    A (text_hash, scorer, scorer_version) already landed is left as it was, so landing the
    same scores again writes nothing; within ``scores`` one row of a key lands.
    """
    report = LandingReport()
    if not scores.num_rows:
        return report
    columns = raw_schema.table("text_scores").arrow_columns()
    given = [c for c in columns if c != "landing_id"]
    missing = [
        c
        for c in ("text_hash", "scorer", "scorer_version", "status")
        if c not in scores.column_names
    ]
    if missing:
        raise ValueError(f"text scores lack the column(s) {', '.join(missing)}")
    arrays = {
        c: scores[c].cast(columns[c])
        if c in scores.column_names
        else pa.nulls(scores.num_rows, columns[c])
        for c in given
    }
    key = "text_hash, scorer, scorer_version"
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "score", None)
        arrays["landing_id"] = pa.array([landing_id] * scores.num_rows, pa.string())
        con.register("incoming_scores", pa.table(arrays))
        cols = ", ".join(columns)
        (inserted,) = con.execute(
            f"insert into raw.text_scores ({cols}) "
            f"select {cols} from incoming_scores "
            f"qualify row_number() over (partition by {key}) = 1 "
            f"on conflict ({key}) do nothing"
        ).fetchone()
        _settle(con, landing_id, own)
    report.inserted = int(inserted)
    report.unchanged = scores.num_rows - report.inserted
    return report
