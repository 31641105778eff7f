"""The response import over Arrow record batches: each value checked and each key computed
without a Python object per row.

A batch's columns are dictionary-encoded, and every rule of ``ableaudit.ingest.responses``
(``parse_name``, ``parse_task``, ``parse_temperature``, ...) runs once per distinct value,
its result spread back over the rows by the dictionary's indices: the same functions as the
row-by-row checks, so a value is judged the same way whichever path reads it. A file holds
few distinct model ids, arms, queries, temperatures and sample indices, so this costs
little; the answer texts, which are many, are checked with Arrow kernels only (a NUL, a
non-text value, blank by Python's own ``str.isspace``).

The generation key is the sha256 of the canonical JSON of the row's identity
(``ableaudit.keys.content_key``). Each part of that JSON is written by ``json.dumps`` for
each distinct value, and DuckDB joins the parts and hashes them over the batch
(``ableaudit.keys.imported_key_sql``), bit-identical to ``content_key`` of the same identity.

A batch whose values the rules refuse only comes back with ``ok`` false on those rows:
the message naming them is written by the row-by-row checks, so it reads exactly as it
always has.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ableaudit.ingest import files
from ableaudit.ingest import response_fields as fields

BATCH_ROWS = 65_536
"""Rows per record batch: what the import holds in memory at once, besides DuckDB's own."""
READ_BUFFER = 4 * 2**20
"""Bytes of a Parquet column read at a time (the file is streamed, not loaded)."""

WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Every character ``str.isspace`` calls whitespace (a unit test checks it against Python)."""
BLANK_PATTERN = "^[" + "".join(f"\\x{{{ord(c):x}}}" for c in WHITESPACE) + "]*$"
"""A text with nothing but what Python's ``str.strip`` removes (RE2 syntax)."""

_SCALAR = (
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_null,
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_boolean,
)

NORMALISED = pa.schema(
    [
        ("_row", pa.int64()),
        ("ok", pa.bool_()),
        ("model_id", pa.string()),
        ("arm", pa.string()),
        ("query_set", pa.string()),
        ("query_id", pa.string()),
        ("disability_id", pa.string()),
        ("condition", pa.string()),
        ("task", pa.string()),
        ("temperature", pa.float64()),
        ("sample_index", pa.int32()),
        ("response_text", pa.dictionary(pa.int32(), pa.string())),
        ("status", pa.string()),
        ("condition_given", pa.string()),
        ("domain_given", pa.string()),
        ("model_json", pa.string()),
        ("arm_json", pa.string()),
        ("task_json", pa.string()),
        ("temperature_json", pa.string()),
        ("prompt_id", pa.string()),
        ("domain", pa.string()),
        ("prompt_text", pa.string()),
        ("prompt_json", pa.string()),
    ]
)
"""A batch as the import lands it, before its key (``ableaudit.keys.imported_key_sql``)."""


def json_text(value: Any) -> str:
    """One value as ``ableaudit.keys.canonical_json`` writes it."""
    return json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------- reading


@dataclass
class Source:
    """A responses file as record batches, each with a ``_row`` column (the row number a
    user finds in the file), or None when its columns hold values Arrow cannot carry
    faithfully (a struct, a list, a mix of types): those files take the row-by-row path."""

    columns: list[str]
    """Its columns, in file order."""
    batches: Callable[[], Iterator[pa.RecordBatch]] | None
    """A fresh iterator over its batches (read again for the message when a row is refused)."""
    numbered: Callable[[], Iterator[list[tuple[int, dict[str, Any]]]]]
    """The same rows as the row-by-row checks read them, a batch at a time."""
    rows: int
    """Rows in the file."""


def open_parquet(path: str | Path, error: type[Exception], batch_rows: int = BATCH_ROWS) -> Source:
    """A Parquet file read a batch at a time; refused as ``files.read_parquet`` refuses it."""
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise error(f"{p} does not exist or is not a file; check the path")

    def opened() -> pq.ParquetFile:
        try:
            # read as a stream: a row group can hold the whole file (1M rows by default).
            # The answers are read as text and each batch's are encoded on their own
            # (``_encoded``): read as a dictionary, every batch of a row group carried the
            # distinct answers of all the batches before it, which at 300,000 distinct
            # answers grew to 278 MB a batch and was checked again in each
            return pq.ParquetFile(p, pre_buffer=False, buffer_size=READ_BUFFER)
        except (pa.ArrowException, OSError) as err:
            raise error(
                f"{p} is not a readable Parquet file ({str(err).splitlines()[0]}); write it "
                "again, e.g. with pandas.DataFrame.to_parquet"
            ) from None

    pf = opened()
    names = pf.schema_arrow.names
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        raise error(f"{p} repeats column(s) {repeated}; keep one of each")
    rows = pf.metadata.num_rows

    def raw() -> Iterator[pa.RecordBatch]:
        start = 1
        try:
            for b in opened().iter_batches(batch_size=batch_rows):
                yield b.append_column(
                    "_row", pa.array(np.arange(start, start + b.num_rows, dtype=np.int64))
                )
                start += b.num_rows
        except (pa.ArrowException, OSError) as err:
            raise error(
                f"{p} is not a readable Parquet file ({str(err).splitlines()[0]}); write it "
                "again, e.g. with pandas.DataFrame.to_parquet"
            ) from None

    def numbered() -> Iterator[list[tuple[int, dict[str, Any]]]]:
        for b in raw():
            row_numbers = b.column("_row").to_pylist()
            yield list(zip(row_numbers, b.drop_columns(["_row"]).to_pylist()))

    scalar = all(
        any(t(f.type) for t in _SCALAR) or (f.name == "response_text" and _textual(f.type))
        for f in pf.schema_arrow
    )
    return Source(names, raw if scalar else None, numbered, rows)


def from_numbered(
    numbered: Sequence[tuple[int, dict[str, Any]]], batch_rows: int = BATCH_ROWS
) -> Source:
    """Rows a text reader gave (CSV, JSONL) as record batches: a column of text, of whole
    numbers or of floating numbers (and nulls) becomes an Arrow column of that type; a file
    with any other column (an object, a list, true/false, a mix of types, a number past
    int64, text Arrow cannot encode) is left to the row-by-row path."""
    columns = files.columns_of(r for _, r in numbered)

    def whole() -> Iterator[list[tuple[int, dict[str, Any]]]]:
        yield list(numbered)

    row_by_row = Source(columns, None, whole, len(numbered))
    types: dict[str, pa.DataType] = {}
    for c in columns:
        kinds = {type(r.get(c)) for _, r in numbered} - {type(None)}
        if kinds <= {str}:
            types[c] = pa.string()
        elif kinds == {int}:
            types[c] = pa.int64()
        elif kinds == {float}:
            types[c] = pa.float64()
        else:
            return row_by_row
    batches = []
    try:
        for start in range(0, len(numbered), batch_rows):
            part = numbered[start : start + batch_rows]
            arrays = [pa.array([n for n, _ in part], pa.int64())]
            arrays += [pa.array([r.get(c) for _, r in part], types[c]) for c in columns]
            batches.append(pa.RecordBatch.from_arrays(arrays, names=["_row", *columns]))
    except (pa.ArrowException, OverflowError, UnicodeError):
        return row_by_row
    return Source(columns, lambda: iter(batches), whole, len(numbered))


# --------------------------------------------------------------------------- one batch


def _fails(fn: Callable[..., Any], error: type[Exception]) -> Callable[..., Any]:
    """``fn`` returning None instead of raising ``error`` (the row is marked, not named)."""

    def wrapped(value: Any) -> Any:
        try:
            return fn(value)
        except error:
            return None

    return wrapped


def per_value(
    column: pa.Array | None, rows: int, fn: Callable[[Any], tuple | None], types: Sequence
) -> list[pa.Array]:
    """``fn`` of each distinct value of ``column`` (a missing column: None in every row),
    spread over the rows: one array per element of ``fn``'s tuple, and last a bool array,
    false where ``fn`` returned None (a refused value)."""
    if column is None or pa.types.is_null(column.type):
        values, indices = (
            [None],
            pa.repeat(pa.scalar(0, pa.int32()), rows),
        )
    else:
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        values, indices = encoded.dictionary.to_pylist(), encoded.indices
    results = [fn(v) for v in values]
    out = []
    for i, t in enumerate(types):
        table = pa.array([None if r is None else r[i] for r in results], t)
        out.append(table.take(indices))
    out.append(pa.array([r is not None for r in results], pa.bool_()).take(indices))
    return out


def normalise(
    batch: pa.RecordBatch,
    disabilities: dict[str, str],
    prompts: dict[tuple[str, str, str | None], tuple[str, str, str]],
    default_query_set: str,
) -> pa.Table:
    """One batch in the ``NORMALISED`` schema; ``ok`` is false on a row any rule of
    ``validate_rows`` would refuse but the key twice in the file (``disabilities`` and
    ``prompts`` as ``validate_rows`` takes them)."""
    n = batch.num_rows
    names = set(batch.schema.names)
    if "response_text" in names and _textual(batch.schema.field("response_text").type):
        # encoded once here, for the rules on texts and for the NUL check of every column
        i = batch.schema.get_field_index("response_text")
        batch = batch.set_column(i, "response_text", _encoded(batch.column(i)))

    def col(name: str) -> pa.Array | None:
        return batch.column(name) if name in names else None

    def name(default: str | None, what: str) -> Callable[[Any], tuple | None]:
        parse = _fails(lambda v: fields.parse_name(v, default, what), fields.FieldError)
        return lambda v: None if (s := parse(v)) is None else (s, json_text(s))

    s, j = pa.string(), pa.string()
    model_id, model_json, ok_model = per_value(col("model_id"), n, name(None, "model"), [s, j])
    arm, arm_json, ok_arm = per_value(col("arm"), n, name("baseline", "arm"), [s, j])
    query_set, _, ok_qs = per_value(
        col("query_set"), n, name(default_query_set, "query set"), [s, j]
    )
    task_of = _fails(fields.parse_task, fields.FieldError)
    task, task_json, ok_task = per_value(
        col("task"), n, lambda v: None if (t := task_of(v)) is None else (t, json_text(t)), [s, j]
    )

    def temperature_of(v: Any) -> tuple | None:
        try:
            t = fields.parse_temperature(v)
        except fields.FieldError:
            return None
        return (t, json_text(t))

    temperature, temperature_json, ok_temp = per_value(
        col("temperature"), n, temperature_of, [pa.float64(), j]
    )
    sample_of = _fails(fields.parse_sample_index, fields.FieldError)
    sample_index, ok_sample = per_value(
        col("sample_index"),
        n,
        lambda v: None if (k := sample_of(v)) is None else (k,),
        [pa.int32()],
    )

    def disability_of(v: Any) -> tuple | None:
        raw = "" if v is None else str(v).strip()
        if not raw:
            return (None, "neutral")
        did = disabilities.get(raw.lower())
        return None if did is None else (did, "disability")

    disability_id, condition, ok_dis = per_value(col("disability"), n, disability_of, [s, s])

    def given(v: Any) -> tuple:
        return (None,) if fields.is_blank(v) else (str(v).strip().lower(),)

    condition_given, _ = per_value(col("condition"), n, given, [s])
    domain_given, _ = per_value(col("domain"), n, given, [s])
    query_id, _ = per_value(col("query_id"), n, lambda v: (str(v or "").strip(),), [s])

    text, ok_text, status = _texts(col("response_text"), n)

    prompt_id, domain, prompt_text, prompt_json, ok_prompt = _prompts_of(
        query_set, query_id, disability_id, prompts
    )
    ok_condition = pc.fill_null(pc.equal(condition_given, condition), True)
    ok_domain = pc.fill_null(pc.equal(domain_given, domain), True)
    ok = pa.repeat(True, n)
    flags = (ok_model, ok_arm, ok_qs, ok_task, ok_temp, ok_sample, ok_dis, ok_text, ok_prompt)
    for flag in (*flags, ok_condition, ok_domain):
        ok = pc.and_(ok, flag)
    for field in batch.schema:
        if field.name != "_row" and _textual(field.type):
            ok = pc.and_(ok, pc.invert(_holds_nul(batch.column(field.name))))
    return pa.Table.from_arrays(
        [
            batch.column("_row"),
            ok,
            model_id,
            arm,
            query_set,
            query_id,
            disability_id,
            condition,
            task,
            temperature,
            sample_index,
            text,
            status,
            condition_given,
            domain_given,
            model_json,
            arm_json,
            task_json,
            temperature_json,
            prompt_id,
            domain,
            prompt_text,
            prompt_json,
        ],
        schema=NORMALISED,
    )


def _textual(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _encoded(column: pa.Array) -> pa.DictionaryArray:
    """A text column as a dictionary of its distinct values (a file's answers repeat)."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    if not pa.types.is_string(column.type.value_type):
        column = column.cast(pa.dictionary(column.type.index_type, pa.string()))
    return column


def _holds_nul(column: pa.Array) -> pa.Array:
    """Whether each value holds a NUL character, looked for once per distinct value."""
    encoded = _encoded(column)
    found = pc.match_substring(encoded.dictionary, "\x00").take(encoded.indices)
    return pc.fill_null(found, False)


def _texts(column: pa.Array | None, n: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(the answer as landed, whether it is acceptable, 'ok' or 'empty') of each row: null
    is the empty answer; a value that is not text is refused; a text is 'empty' when
    Python's ``str.strip`` leaves nothing of it (checked once per distinct text)."""
    empty = pc.dictionary_encode(pa.repeat(pa.scalar("", pa.string()), n))
    if column is None or pa.types.is_null(column.type):
        return empty, pa.repeat(True, n), pa.repeat(pa.scalar("empty"), n)
    if not _textual(column.type):  # a number or a boolean as the answer, unless null
        return empty, pc.is_null(column), pa.repeat(pa.scalar("empty"), n)
    encoded = _encoded(column)
    blank = pc.match_substring_regex(encoded.dictionary, BLANK_PATTERN).take(encoded.indices)
    status = pc.if_else(pc.fill_null(blank, True), "empty", "ok")
    if encoded.null_count:
        encoded = pc.dictionary_encode(pc.fill_null(encoded.cast(pa.string()), ""))
    return encoded, pa.repeat(True, n), status


def _prompts_of(
    query_set: pa.Array,
    query_id: pa.Array,
    disability_id: pa.Array,
    prompts: dict[tuple[str, str, str | None], tuple[str, str, str]],
) -> list[pa.Array]:
    """The prompt of each row's (query set, query id, disability), looked up once per
    distinct triple: prompt_id, domain, prompt_text, its JSON, and whether it was found."""
    qs, qid = pc.fill_null(query_set, ""), pc.fill_null(query_id, "")

    def length(a: pa.Array) -> pa.Array:
        return pc.cast(pc.utf8_length(a), pa.string())

    # length-prefixed, so two different triples never read as one
    joined = pc.binary_join_element_wise(
        length(qs),
        qs,
        length(qid),
        qid,
        pc.if_else(pc.is_null(disability_id), "-", "+"),
        pc.fill_null(disability_id, ""),
        ":",
    )
    encoded = pc.dictionary_encode(joined)
    first = pc.index_in(encoded.dictionary, value_set=joined)
    triples = zip(
        query_set.take(first).to_pylist(),
        query_id.take(first).to_pylist(),
        disability_id.take(first).to_pylist(),
    )
    found = [prompts.get(t) for t in triples]
    s = pa.string()
    columns = [
        pa.array([None if f is None else f[0] for f in found], s),
        pa.array([None if f is None else f[1] for f in found], s),
        pa.array([None if f is None else f[2] for f in found], s),
        pa.array([None if f is None else json_text(f[0]) for f in found], s),
        pa.array([f is not None for f in found], pa.bool_()),
    ]
    return [c.take(encoded.indices) for c in columns]
