"""The texts a scorer has not scored, read in Arrow batches, and one batch scored.

A text is keyed as the score models key it: ``sha256(response_text)`` over the
generations with a text (``stg_raw__generations.text_hash``). It is pending for a
scorer when neither ``raw.text_scores`` nor that scorer's score model holds a row
for it under the scorer's current version. Every read opens the warehouse
read-only and closes it before anything is landed (DuckDB lets one process write).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ableaudit.scorers.registry import LONG_MODEL, MASKED_MODEL, registered
from ableaudit.warehouse.connection import connect


def scorer_models() -> dict[str, str]:
    """Every registered scorer and the model that holds its scores (and takes its landed
    rows, macro ``landed_text_scores``): the scorers the flow may score. A masked scorer
    reads a text with its pair's mask set, not a text alone: the build scores it."""
    return {
        name: entry.model for name, entry in registered().items() if entry.model != MASKED_MODEL
    }


def default_scorers() -> tuple[str, ...]:
    """What `ableaudit score` scores when no --scorer is given: every scorer that only
    computes. Regard (a transformer classifier, loaded by every worker: side effects) is
    scored with ``--scorer regard``."""
    models = scorer_models()
    return tuple(
        sorted(n for n, entry in registered().items() if n in models and not entry.side_effects)
    )


FINAL_STATUSES = ("ok", "truncated")
"""Scores that land; any other status ('unavailable', 'error') is left for the next attempt."""


class ScoringError(ValueError):
    """A scoring request that cannot run; the message says what to change."""


def check_scorers(names: Sequence[str]) -> list[str]:
    """The scorers to score, in the order given, each known and read back by its model."""
    known = scorer_models()
    out = []
    for name in names:
        if registered().get(name) is not None and registered()[name].model == MASKED_MODEL:
            raise ScoringError(
                f"scorer {name!r} scores a text with the mask set of each pair it is in, which "
                f"`ableaudit build` scores (model {MASKED_MODEL}); the flow scores "
                f"{', '.join(sorted(known))}"
            )
        if name not in known:
            raise ScoringError(
                f"unknown scorer {name!r}; the flow scores {', '.join(sorted(known))}"
            )
        if name not in out:
            out.append(name)
    if not out:
        raise ScoringError(f"no scorer given; the flow scores {', '.join(sorted(known))}")
    return out


@dataclass(frozen=True)
class Pending:
    """The texts some scorer has not scored, one row per text, ordered by text_hash."""

    keys: pa.Table
    """text_hash, generation_id (one generation with that text), and per scorer ``needs_<name>``."""
    versions: dict[str, str]
    """The version each scorer writes today."""

    def count(self, scorer: str) -> int:
        return int(pc.sum(self.keys[f"needs_{scorer}"]).as_py() or 0)


def _model_relation(con, model: str) -> str | None:
    found = con.execute(
        "select table_schema from information_schema.tables where table_name = ? "
        "and table_schema <> 'raw' and table_type = 'BASE TABLE' order by table_schema",
        [model],
    ).fetchall()
    return f'"{found[0][0]}"."{model}"' if found else None


def pending_texts(warehouse: str | Path, scorers: Sequence[str]) -> Pending:
    """Which texts each of ``scorers`` still has to score (read-only; the connection is closed)."""
    known = registered()
    versions = {name: known[name].version_for(None) for name in scorers}
    con = connect(warehouse, read_only=True)
    try:
        params: list[str] = []
        needs = []
        for name in scorers:
            conditions = [
                "not exists (select 1 from raw.text_scores s where s.text_hash = t.text_hash "
                "and s.scorer = ? and s.scorer_version = ?)"
            ]
            params += [name, versions[name]]
            model = known[name].model
            relation = _model_relation(con, model)
            if relation is not None:
                # a row that is no final result (Regard 'unavailable' or 'error') is scored again
                long = model == LONG_MODEL
                conditions.append(
                    f"not exists (select 1 from {relation} m where m.text_hash = t.text_hash "
                    f"and m.scorer_version = ? and m.status in {FINAL_STATUSES}"
                    + (" and m.scorer = ?)" if long else ")")
                )
                params += [versions[name], name] if long else [versions[name]]
            needs.append(f"({' and '.join(conditions)}) as needs_{name}")
        keys = con.sql(
            "select * from (select t.text_hash, t.generation_id, "
            + ", ".join(needs)
            + " from (select sha256(response_text) as text_hash, min(generation_id) as generation_id "
            "from raw.generations where response_text is not null group by 1) t) "
            f"where {' or '.join(f'needs_{n}' for n in scorers)} order by text_hash",
            params=params,
        ).to_arrow_table()
    finally:
        con.close()
    return Pending(keys, versions)


def read_batches(
    warehouse: str | Path, keys: pa.Table, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """The texts of ``keys`` (rows of ``Pending.keys``) in record batches of ``batch_size``, in
    key order, each with the key columns and ``response_text``. The read-only connection is
    closed before the first batch is handed out."""
    con = connect(warehouse, read_only=True)
    try:
        con.register("wanted_texts", keys)
        reader = con.sql(
            "select w.*, g.response_text from wanted_texts w "
            "join raw.generations g using (generation_id) order by w.text_hash"
        ).to_arrow_reader(batch_size)
        batches = list(_rebatched(reader, batch_size))
    finally:
        con.close()
    found = sum(b.num_rows for b in batches)
    if found != keys.num_rows:
        raise RuntimeError(
            f"{keys.num_rows - found} of {keys.num_rows} texts to score left raw.generations while "
            "they were read (a landing forgotten or replaced meanwhile); run the scoring again"
        )
    yield from batches


def _rebatched(reader: pa.RecordBatchReader, size: int) -> Iterator[pa.RecordBatch]:
    """Batches of exactly ``size`` rows (the last one shorter), whatever sizes the reader yields."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in reader:
        pending.append(batch)
        rows += batch.num_rows
        while rows >= size:
            table = pa.Table.from_batches(pending)
            yield table.slice(0, size).combine_chunks().to_batches()[0]
            rest = table.slice(size)
            pending = rest.combine_chunks().to_batches() if rest.num_rows else []
            rows = rest.num_rows
    if rows:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def score_batch(scorer: str, batch: pa.RecordBatch, in_process: bool = False) -> pa.Table:
    """The rows of raw.text_scores for the texts of ``batch`` that ``scorer`` needs.

    The value is the registered scorer function's, the one the dbt UDF calls, so a
    landed score equals the one dbt would compute, bit for bit. ``in_process``: score in
    this process alone (a worker of the task runner), not on the scorer's own process pool.
    """
    from ableaudit.scorers import parallel

    entry = registered()[scorer]
    if f"needs_{scorer}" in batch.schema.names:
        batch = batch.filter(batch.column(f"needs_{scorer}"))
    texts = batch.column("response_text")
    if in_process:
        os.environ[parallel.WORKERS_ENV] = "1"  # this process is one worker of the runner
    if entry.arguments[1:]:  # Regard: the classifier (empty: its default) and texts per pass
        n = batch.num_rows
        values = entry.function(texts, pa.array([""] * n), pa.array([32] * n, pa.int32()))
    else:
        values = entry.function(texts)
    if len(values) != batch.num_rows:
        raise RuntimeError(
            f"scorer {scorer} returned {len(values)} values for {batch.num_rows} texts"
        )
    columns = {
        "text_hash": batch.column("text_hash"),
        "scorer": pa.array([scorer] * batch.num_rows, pa.string()),
        "scorer_version": pa.array([entry.version_for(None)] * batch.num_rows, pa.string()),
    }
    if pa.types.is_struct(values.type):
        for field in values.type:
            columns[field.name] = pc.struct_field(values, field.name)
        table = pa.table(columns)
        return table.filter(pc.is_in(table["status"], pa.array(FINAL_STATUSES)))
    column = "score" if entry.model == LONG_MODEL else entry.sql_function
    columns[column] = values.cast(pa.float64()) if column == "score" else values
    columns["status"] = pa.array(["ok"] * batch.num_rows, pa.string())
    return pa.table(columns)
