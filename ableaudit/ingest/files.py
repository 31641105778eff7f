"""Reading the files people hand to `ableaudit import`: text, CSV, JSONL and Parquet.

Every import reads its file through here, so a careless or hostile file is refused the
same way whichever command it was given to: a binary or UTF-16 file, a NUL byte, bytes
that are not UTF-8, a CSV separated by semicolons or tabs, a row with more or fewer
fields than the header, a repeated or empty column name, an unreadable Parquet file.
Each refusal is one message naming the file, the line as an editor shows it (the CSV
header is line 1) and the fix, raised as the caller's own error class. A UTF-8
byte-order mark is accepted and dropped.

Rows come back numbered the way a person finds them: the CSV line a record starts on,
the JSONL line, the Parquet row counted from 1.
"""

from __future__ import annotations

import codecs
import csv
import difflib
import io
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

LISTED = 10
"""Problems listed in one message before '... and N more'."""

_DELIMITERS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_SAVE = "save it as UTF-8 text (most editors and spreadsheets offer 'CSV UTF-8')"

Numbered = list[tuple[int, dict[str, Any]]]


def did_you_mean(value: Any, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or '' when none is close."""
    if not isinstance(value, str) or not value.strip():
        return ""
    options = sorted({c for c in choices if c})
    lowered = {c.lower(): c for c in options}
    close = difflib.get_close_matches(value.strip().lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[close[0]]!r}?)" if close else ""


def listed(problems: Sequence[str], limit: int = LISTED) -> str:
    """Problems one per indented line, the first ``limit`` of them and a count of the rest."""
    shown = [f"  {p}" for p in problems[:limit]]
    if len(problems) > limit:
        shown.append(f"  ... and {len(problems) - limit} more")
    return "\n".join(shown)


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_text(path: str | Path, error: type[Exception]) -> str:
    """The file as text, or ``error`` saying why it is not UTF-8 text and how to make it so."""
    p = Path(path)
    if not p.is_file():
        raise error(f"{p} does not exist or is not a file; check the path")
    try:
        data = p.read_bytes()
    except OSError as err:
        raise error(f"{p} cannot be read ({err.strerror or err}); check its permissions") from None
    for bom, name in _WIDE_BOMS:
        if data.startswith(bom):
            raise error(
                f"{p} is encoded as {name} (it starts with a {name} byte-order mark); {_SAVE}"
            )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise error(
            f"{p}: line {_line_of(data, nul)} holds a NUL byte (\\x00), so this is not a text "
            f"file (a binary export, a compressed file or UTF-16 without a byte-order mark?); "
            f"{_SAVE}, or write Parquet"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise error(
            f"{p}: line {_line_of(data, err.start)} is not UTF-8 (byte 0x{data[err.start]:02x} at "
            f"offset {err.start}; Latin-1 or Windows-1252?); {_SAVE}"
        ) from None
    if not text.strip():
        raise error(f"{p} is empty; it needs a header row and at least one row")
    return text


def read_csv(
    path: str | Path,
    error: type[Exception],
    blank_lines: list[int] | None = None,
    unnamed: bool = False,
) -> tuple[list[str], Numbered]:
    """(header, numbered rows) of a comma-separated UTF-8 file, every cell as text.

    Refuses, in one message each: a header naming one column that holds a semicolon, tab
    or vertical bar (another delimiter); an empty or repeated column name; a broken quote;
    rows with more or fewer fields than the header (the first few listed by line).
    Blank lines (and lines of empty cells) are skipped, their numbers appended to
    ``blank_lines`` when given; an empty cell is ''. ``unnamed``: a column with an empty
    name is kept as ``column_<position>`` instead of refused (for a published file whose
    reader picks its columns by name, such as one written with a pandas index).
    """
    p = Path(path)
    text = read_text(p, error)
    # no cell is longer than the file: a long answer is read whole (the module's default
    # limit, 131,072 characters, would report it as an unclosed quote)
    csv.field_size_limit(max(csv.field_size_limit(), len(text)))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for record in reader:
            records.append((start, record))
            start = reader.line_num + 1
    except csv.Error as err:
        raise error(
            f"{p}: line {start}: {err}; close the quote, or double a quote inside a quoted "
            'field ("")'
        ) from None
    if blank_lines is not None:
        blank_lines += [n for n, r in records[1:] if not any(v.strip() for v in r)]
    records = [(n, r) for n, r in records if any(v.strip() for v in r)]
    if not records:
        raise error(f"{p} is empty; it needs a header row and at least one row")
    header_line, header = records[0]
    header = [h.strip() for h in header]
    if len(header) == 1:
        for delim, name in _DELIMITERS.items():
            if delim in header[0]:
                raise error(
                    f"{p}: line {header_line} (the header) is one column {header[0]!r}: the file "
                    f"is separated by {name}, not commas; export it as comma-separated CSV"
                )
    blank = [i + 1 for i, h in enumerate(header) if not h]
    if blank and unnamed:
        header = [h or f"column_{i + 1}" for i, h in enumerate(header)]
    elif blank:
        raise error(
            f"{p}: line {header_line} (the header) has an empty column name at position(s) "
            f"{blank}; name every column or delete the empty ones"
        )
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise error(
            f"{p}: line {header_line} (the header) repeats column(s) {repeated}; keep one of each"
        )
    ragged = [
        f"line {n}: {len(r)} fields for {len(header)} columns"
        for n, r in records[1:]
        if len(r) != len(header)
    ]
    if ragged:
        raise error(
            f"{p}: {len(ragged)} row(s) do not have one field per column ({len(header)}: "
            f"{', '.join(header)}); nothing was landed:\n{listed(ragged)}\n"
            "Quote fields that hold commas, and give every row the header's columns."
        )
    return header, [(n, dict(zip(header, r))) for n, r in records[1:]]


def read_jsonl(path: str | Path, error: type[Exception]) -> Numbered:
    """One JSON object per line (blank lines skipped); values keep their JSON types."""
    p = Path(path)
    rows: Numbered = []
    for line_no, line in enumerate(read_text(p, error).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise error(
                f"{p} could not be read: line {line_no} is not valid JSON ({err.msg}, column "
                f"{err.colno}); write one JSON object per line"
            ) from None
        if not isinstance(obj, dict):
            raise error(
                f"{p} could not be read: line {line_no} holds a {type(obj).__name__}, "
                "not a JSON object; write one object per line"
            )
        rows.append((line_no, obj))
    return rows


def read_parquet(path: str | Path, error: type[Exception]) -> Numbered:
    """Parquet rows, counted from 1, as Python values (a struct column gives dicts)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise error(f"{p} does not exist or is not a file; check the path")
    try:
        table = pq.read_table(p)
    except (pa.ArrowException, OSError) as err:
        raise error(
            f"{p} is not a readable Parquet file ({str(err).splitlines()[0]}); write it again, "
            "e.g. with pandas.DataFrame.to_parquet"
        ) from None
    names = table.column_names
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        raise error(f"{p} repeats column(s) {repeated}; keep one of each")
    return list(enumerate(table.to_pylist(), start=1))


def read_numbered(path: str | Path, error: type[Exception]) -> Numbered:
    """CSV, JSONL/NDJSON or Parquet by suffix, as (row number a user finds, row)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".csv":
        return read_csv(p, error)[1]
    if suffix in (".jsonl", ".ndjson", ".json"):
        return read_jsonl(p, error)
    if suffix == ".parquet":
        return read_parquet(p, error)
    if not p.is_file():
        raise error(f"{p} does not exist or is not a file; check the path")
    raise error(f"{p}: unsupported file type {suffix!r}; use .csv, .jsonl or .parquet")


def columns_of(rows: Iterable[dict[str, Any]]) -> list[str]:
    """Every column any row has, in first-seen order (a JSONL object may leave keys out)."""
    return list(dict.fromkeys(c for r in rows for c in r))


def refuse_unknown_columns(
    path: str | Path, columns: Iterable[str], known: Sequence[str], error: type[Exception]
) -> None:
    """A column the import does not read is refused, not ignored: it is most often a
    misspelt one (``respons_text``) whose values would otherwise be silently lost."""
    unknown = [c for c in columns if c not in known]
    if unknown:
        named = ", ".join(f"{c!r}{did_you_mean(c, known)}" for c in unknown)
        raise error(
            f"{path}: column(s) {named} are not read by this import; rename them, or drop them. "
            f"Columns: {', '.join(known)}"
        )


def nul_fields(row: dict[str, Any]) -> list[str]:
    """The fields of a row whose text holds a NUL character (JSON '\\u0000', Parquet)."""
    return [k for k, v in row.items() if isinstance(v, str) and "\x00" in v]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""The first characters that make a spreadsheet run a cell as a formula (OWASP, CSV injection)."""


def escape_formula(value: Any) -> Any:
    """A text cell a spreadsheet would run, with a leading ``'`` (shown as text, never run);
    a cell that starts with a quote before such a character (or another quote) gets one too,
    so ``unescape_formula`` gives every cell back exactly."""
    if isinstance(value, str) and value:
        if value[0] in FORMULA_STARTS or (
            value[:1] == "'" and value[1:2] in (*FORMULA_STARTS, "'")
        ):
            return "'" + value
    return value


def unescape_formula(value: Any) -> Any:
    """The cell ``escape_formula`` was given."""
    if isinstance(value, str) and value[:1] == "'" and value[1:2] in (*FORMULA_STARTS, "'"):
        return value[1:]
    return value
