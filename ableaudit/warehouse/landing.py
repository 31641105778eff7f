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
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ableaudit.records import GenerationResult, LandingReport, PlannedGeneration
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


def _arrow(rows: Sequence[dict[str, Any]], columns: dict[str, pa.DataType]) -> pa.Table:
    schema = pa.schema(list(columns.items()))
    return pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows], schema=schema)


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
        if prior is None or (
            prior.get(status_column) == "error" and r.get(status_column) != "error"
        ):
            seen[r[key]] = r
    unique = list(seen.values())
    batch = _arrow(unique, columns)
    cols = ", ".join(columns)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != key)
    with writing(warehouse) as con:
        con.register("incoming", batch)
        before = dict(
            con.execute(
                f"select t.{key}, t.{status_column} from raw.{table} t join incoming i using ({key})"
            ).fetchall()
        )
        con.execute(
            f"insert into raw.{table} ({cols}) select {cols} from incoming "
            f"on conflict ({key}) do update set {updates}, created_at = now() "
            f"where raw.{table}.{status_column} = 'error'"
        )
        for statement in also:
            con.execute(statement)
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
            "insert into raw.generation_errors (generation_id, run_id, error_message) "
            "select generation_id, run_id, error_message from incoming where status = 'error'",
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
    replace, so the landed row is first copied into raw.generation_history and
    then overwritten by the incoming one (the key stays, so later re-imports find it).
    """
    if not rows:
        return LandingReport(), 0
    replace = sorted(set(supersede))
    cols = ", ".join(GENERATION_COLUMNS)
    updates = ", ".join(f"{c} = i.{c}" for c in GENERATION_COLUMNS if c != "generation_id")
    with writing(warehouse) as con:
        con.register("incoming", _arrow(rows, GENERATION_COLUMNS))
        (present,) = con.execute(
            "select count(*) from raw.generations join incoming using (generation_id)"
        ).fetchone()
        con.execute(
            f"insert into raw.generations ({cols}) select {cols} from incoming "
            "on conflict (generation_id) do nothing"
        )
        if replace:
            con.register("superseded", pa.table({"generation_id": pa.array(replace, pa.string())}))
            con.execute(
                "insert into raw.generation_history (generation_id, run_id, status, response_text, "
                "source, landed_at, replaced_by_run_id) "
                "select g.generation_id, g.run_id, g.status, g.response_text, g.source, "
                "g.created_at, i.run_id from raw.generations g "
                "join incoming i using (generation_id) join superseded using (generation_id)"
            )
            con.execute(
                f"update raw.generations as g set {updates}, created_at = now() from incoming i "
                "where g.generation_id = i.generation_id "
                "and g.generation_id in (select generation_id from superseded)"
            )
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
    """Land verdict rows in one transaction; see the module docstring for the rules."""
    if rows:
        _check(rows)
    return land_keyed(warehouse, "judgments", "judgment_id", "call_status", JUDGMENT_COLUMNS, rows)


# --------------------------------------------------------------------------- runs


class RunConflict(RuntimeError):
    """Another audit is running on this warehouse; the message names it."""


LEASE_S = 30 * 60.0
"""How long a run on another host holds the warehouse after it last landed something; on this
host a run holds it while its process lives."""


def _run_alive(
    host: str | None, pid: int | None, heartbeat_age_s: float | None, lease_s: float
) -> bool:
    if host == socket.gethostname() and pid is not None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return heartbeat_age_s is not None and heartbeat_age_s < lease_s


def start_run(
    warehouse: str | Path, run_id: str, config_json: str, lease_s: float = LEASE_S
) -> list[str]:
    """Take the warehouse for a run: its row, 'running' until ``finish_run``.

    One audit runs on a warehouse at a time: a live run (its process alive on this
    host, or a recent landing from another host) refuses the new one with a
    message naming it; a run whose process is gone is marked 'interrupted'.
    Returns the ids of the runs so marked.
    """
    with writing(warehouse) as con:
        others = con.execute(
            "select run_id, host, pid, started_at, date_diff('second', heartbeat_at, now()::timestamp) "
            "from raw.runs where status = 'running' and run_id <> ?",
            [run_id],
        ).fetchall()
        dead = []
        for other, host, pid, started, age in others:
            if _run_alive(host, pid, age, lease_s):
                raise RunConflict(
                    f"run {other} (started {started:%Y-%m-%d %H:%M:%S}, process {pid} on {host}) is still auditing "
                    f"this warehouse; wait for it to finish, or stop that process. A run whose process died is "
                    "released automatically."
                )
            dead.append(other)
        if dead:
            con.execute(
                "update raw.runs set status = 'interrupted', finished_at = coalesce(heartbeat_at, started_at) "
                "where run_id in (select unnest(?::varchar[]))",
                [dead],
            )
        con.execute(
            "insert into raw.runs (run_id, config_json, status, host, pid, heartbeat_at) "
            "values (?, ?, 'running', ?, ?, now()) on conflict (run_id) do update set status = 'running', "
            "host = excluded.host, pid = excluded.pid, heartbeat_at = excluded.heartbeat_at",
            [run_id, config_json, socket.gethostname(), os.getpid()],
        )
    return dead


def finish_run(warehouse: str | Path, run_id: str, status: str) -> None:
    with writing(warehouse) as con:
        con.execute(
            "update raw.runs set status = ?, finished_at = current_timestamp where run_id = ?",
            [status, run_id],
        )


# --------------------------------------------------------------------------- reference data


def replace_query_set(
    warehouse: str | Path | None,
    query_set: str,
    rows: Sequence[dict[str, Any]],
    source_file: str | None,
) -> int:
    """Make ``raw.external_queries`` hold exactly ``rows`` for ``query_set`` (validated by the caller)."""
    with writing(warehouse) as con:
        con.execute("delete from raw.external_queries where query_set = ?", [query_set])
        if rows:
            con.executemany(
                "insert into raw.external_queries "
                "(query_set, query_id, domain, persona, disability_id, prompt_text, source_file) "
                "values (?, ?, ?, ?, ?, ?, ?)",
                [
                    [
                        query_set,
                        r.get("query_id"),
                        r.get("domain"),
                        r.get("persona"),
                        r.get("disability_id"),
                        r.get("prompt_text"),
                        source_file,
                    ]
                    for r in rows
                ],
            )
    return len(rows)


def replace_images(
    warehouse: str | Path | None,
    image_set: str,
    rows: Sequence[dict[str, Any]],
    stale_ids: Sequence[str],
) -> None:
    """Remove ``stale_ids`` of ``image_set`` and insert ``rows`` (validated by the caller)."""
    images = raw_schema.table("images").arrow_columns()
    with writing(warehouse) as con:
        if stale_ids:
            con.executemany(
                "delete from raw.images where image_set = ? and image_id = ?",
                [[image_set, i] for i in stale_ids],
            )
        if rows:
            con.register("incoming_images", _arrow(rows, images))
            cols = ", ".join(images)
            con.execute(f"insert into raw.images ({cols}) select {cols} from incoming_images")


def land_annotations(
    warehouse: str | Path | None, rows: Sequence[dict[str, Any]]
) -> tuple[int, int, list[dict]]:
    """Insert new ratings and update changed ones; returns (inserted, unchanged, replaced) where
    ``replaced`` lists each changed rating with its old and new value."""
    columns = raw_schema.table("annotations").arrow_columns()
    with writing(warehouse) as con:
        con.register("annotation_incoming", _arrow(rows, columns))
        existing = dict(
            con.execute(
                "select a.annotation_id, a.value from raw.annotations a "
                "inner join annotation_incoming i on i.annotation_id = a.annotation_id"
            ).fetchall()
        )
        new = [r["annotation_id"] for r in rows if r["annotation_id"] not in existing]
        changed = [
            r
            for r in rows
            if r["annotation_id"] in existing and existing[r["annotation_id"]] != r["value"]
        ]
        if new:
            con.execute(
                "insert into raw.annotations by name "
                "select i.*, current_timestamp as loaded_at from annotation_incoming i "
                "where i.annotation_id in (select unnest(?::varchar[]))",
                [new],
            )
        if changed:
            con.execute(
                "update raw.annotations as a set value = i.value, value_num = i.value_num, "
                "batch_id = i.batch_id, source_file = i.source_file, loaded_at = current_timestamp "
                "from annotation_incoming i where a.annotation_id = i.annotation_id "
                "and a.annotation_id in (select unnest(?::varchar[]))",
                [[r["annotation_id"] for r in changed]],
            )
    replaced = [
        {
            "item_id": r["item_id"],
            "dimension": r["dimension"],
            "annotator_id": r["annotator_id"],
            "old_value": existing[r["annotation_id"]],
            "new_value": r["value"],
        }
        for r in changed
    ]
    return len(new), len(rows) - len(new) - len(changed), replaced


def add_adapter(
    warehouse: str | Path | None,
    name: str,
    kind: str,
    place: Callable[[int], tuple[dict[str, Any], Callable[[], None]]],
) -> dict[str, Any]:
    """Register the next version of adapter ``name``: ``place(version)`` puts its files in
    place and returns its row and how to undo that; the row lands in the same transaction,
    and a failure undoes the placing. Returns the row as landed (with ``created_at``)."""
    from ableaudit.adapters.registry import RegistryError

    undo: Callable[[], None] | None = None
    try:
        with writing(warehouse) as con:
            kinds = {
                k
                for (k,) in con.execute(
                    "select distinct kind from raw.adapters where name = ?", [name]
                ).fetchall()
            }
            if kinds - {kind}:
                raise RegistryError(
                    f"adapter name {name!r} is already used by a {sorted(kinds)[0]} adapter; "
                    "choose another name"
                )
            (latest,) = con.execute(
                "select coalesce(max(version), 0) from raw.adapters where name = ?", [name]
            ).fetchone()
            row, undo = place(int(latest) + 1)
            cols = [c.name for c in raw_schema.table("adapters").landed()]
            con.execute(
                f"insert into raw.adapters ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                [row[c] for c in cols],
            )
            (created,) = con.execute(
                "select created_at from raw.adapters where adapter_id = ?", [row["adapter_id"]]
            ).fetchone()
    except BaseException:
        if undo is not None:
            undo()
        raise
    return {**row, "created_at": created}


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
