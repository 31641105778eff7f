"""Hostile and careless input files for `ableaudit import ...`, each with what the user must read.

A case is (id, builder, expected fragments). The builder writes its files under a fresh
folder and returns the command line after `ableaudit` (the test adds --warehouse). Every
case must be refused: a non-zero exit, each fragment in the output, no traceback, and the
warehouse's raw tables exactly as they were. The fragments name the file, the row or line
as the user sees it, the field and the fix, so a vaguer message fails the case.

Files are built in bytes here, never copied from a fixture folder, so each case reads as
one place: a PNG or JPEG header is packed by hand, a binary dump is bytes with NULs.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

RESPONSE_HEADER = "model_id,query_id,disability,response_text"
QUERY_HEADER = "Neutral Query,Disability-Specific Query,Domain"
MANIFEST_HEADER = "image_id,path,scenario,gender,race"
JUDGMENT_HEADER = "judge_name,judge_model,kind,generation_id,raw_output"
GOOD_MODEL = "good-model"
"""The model_id of the responses landed before the corpus runs."""
AUDITED_MODEL = "audited-model"
"""The model_id of the generated (audited) row landed before the corpus runs."""
IMAGE_SET = "goodset"
"""The image set landed before the corpus runs; image cases import under the same name,
so a case that wrongly landed would replace it."""


@dataclass(frozen=True)
class World:
    """What the good data landed before the corpus runs, for cases that refer to it."""

    neutral_id: str
    """generation_id of GOOD_MODEL's neutral answer to edu_001."""
    hearing_id: str
    """generation_id of GOOD_MODEL's hearing answer to edu_001."""


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path, World], list[str]]
    expect: tuple[str, ...]

    @property
    def command(self) -> str:
        return self.id.split("-", 1)[0]


# --------------------------------------------------------------------------- byte builders


def png(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims width x height (checksums right, one tiny IDAT)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" + b"\x80" * 3 * max(1, min(width, 4)))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def jpeg(width: int, height: int) -> bytes:
    """A JPEG header: SOI and a baseline SOF0 frame claiming width x height, then EOI."""
    sof = struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x11\x00\x02\x11\x00\x03\x11\x00"
    return b"\xff\xd8\xff\xc0" + sof + b"\xff\xd9"


BINARY = bytes(range(256)) * 8
"""A raw dump: every byte value, NULs included (what a codec's output looks like)."""


def write(folder: Path, name: str, data: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def jsonl(*rows: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def parquet(folder: Path, name: str, table: pa.Table) -> Path:
    path = folder / name
    pq.write_table(table, path)
    return path


def answer(**over) -> dict:
    row = {"model_id": "m", "query_id": "edu_001", "disability": "", "response_text": "A."}
    row.update(over)
    return row


# --------------------------------------------------------------------------- command builders


def responses(name: str, data: str | bytes, *flags: str) -> Callable[[Path, World], list[str]]:
    def build(d: Path, _: World) -> list[str]:
        return ["import", "responses", str(write(d, name, data)), *flags]

    return build


def responses_csv(*lines: str, header: str = RESPONSE_HEADER) -> Callable:
    return responses("answers.csv", "\n".join([header, *lines]) + "\n")


def responses_parquet(columns: dict[str, pa.Array]) -> Callable:
    def build(d: Path, _: World) -> list[str]:
        base = {
            "model_id": pa.array(["m"]),
            "query_id": pa.array(["edu_001"]),
            "disability": pa.array([""]),
            "response_text": pa.array(["A."]),
        }
        path = parquet(d, "answers.parquet", pa.table({**base, **columns}))
        return ["import", "responses", str(path)]

    return build


def queries(name: str, data: str | bytes, *flags: str) -> Callable:
    def build(d: Path, _: World) -> list[str]:
        return ["import", "queries", str(write(d, name, data)), *flags]

    return build


def queries_csv(*lines: str, header: str = QUERY_HEADER, flags: tuple[str, ...] = ()) -> Callable:
    return queries("accesseval.csv", "\n".join([header, *lines]) + "\n", *flags)


GOOD_QUERY = "How do I plan a budget?,How do I plan a budget as {disability}?,Finance"


def manifest(
    images: dict[str, bytes],
    *lines: str,
    header: str = MANIFEST_HEADER,
    raw: bytes | None = None,
    setup: Callable[[Path], None] | None = None,
    image_set: str = IMAGE_SET,
) -> Callable:
    """A manifest CSV beside an image root holding ``images`` (name -> bytes)."""

    def build(d: Path, _: World) -> list[str]:
        root = d / "images"
        root.mkdir()
        for name, data in images.items():
            write(root, name, data)
        if setup is not None:
            setup(d)
        text = raw if raw is not None else ("\n".join([header, *lines]) + "\n").encode()
        path = write(d, "manifest.csv", text)
        return [
            "import",
            "images",
            str(path),
            "--image-root",
            str(root),
            "--image-set",
            image_set,
        ]

    return build


def pairs_tree(files: dict[str, bytes], setup: Callable[[Path], None] | None = None) -> Callable:
    """A PAIRS folder (occupations/<scenario>/<race>_<gender>.png) holding ``files``."""

    def build(d: Path, _: World) -> list[str]:
        root = d / "data"
        for rel, data in files.items():
            write(root, rel, data)
        if setup is not None:
            setup(root)
        return ["import", "images", str(root), "--image-set", IMAGE_SET]

    return build


def annotations(name: str, data: Callable[[World], str | bytes]) -> Callable:
    def build(d: Path, w: World) -> list[str]:
        return ["import", "annotations", str(write(d, name, data(w)))]

    return build


def judgments(name: str, data: Callable[[World], str | bytes]) -> Callable:
    def build(d: Path, w: World) -> list[str]:
        return ["import", "judgments", str(write(d, name, data(w)))]

    return build


def _link(target: str, name: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        root = d / "images" if (d / "images").is_dir() else d
        os.symlink(target, root / name)

    return setup


def _loop(d: Path) -> None:
    os.symlink("b.png", d / "images" / "a.png")
    os.symlink("a.png", d / "images" / "b.png")


def _outside(d: Path) -> None:
    write(d, "secret.png", png(2, 2))


def _sparse(rel: str, size: int) -> Callable[[Path], None]:
    """A valid PNG at ``rel`` (under the image root) stretched to ``size`` bytes by truncate: a
    sparse file, so gigabytes cost no disk, and a reader that reads it whole would hang."""

    def setup(d: Path) -> None:
        root = d / "images" if (d / "images").is_dir() else d
        os.truncate(write(root, rel, OK_PNG), size)

    return setup


def with_flags(build: Callable[[Path, World], list[str]], *flags: str) -> Callable:
    return lambda d, w: [*build(d, w), *flags]


def _tree_link_out(root: Path) -> None:
    write(root.parent, "elsewhere.png", png(2, 2))
    os.symlink(root.parent / "elsewhere.png", root / "occupations" / "chef" / "black_man.png")


OK_PNG = png(2, 2)
R = "m,edu_001,,A."
"""A good responses row (a neutral answer from model 'm')."""

# --------------------------------------------------------------------------- the corpus

CASES: list[Case] = [
    # ---- responses: values the marts cannot hold
    Case(
        "responses-task-banana",
        responses_csv("m,edu_001,,A.,banana", header=RESPONSE_HEADER + ",task"),
        ("answers.csv", "task: row 2 ('banana')", "must be 'text' or 'vision'"),
    ),
    Case(
        "responses-task-misspelt",
        responses_csv("m,edu_001,,A.,txt", header=RESPONSE_HEADER + ",task"),
        ("task: row 2 ('txt')", "did you mean 'text'?"),
    ),
    Case(
        "responses-sample-index-past-int32",
        responses_csv("m,edu_001,,A.,99999999999", header=RESPONSE_HEADER + ",sample_index"),
        ("sample_index: row 2 ('99999999999')", "a whole number from 0 to 2147483647"),
    ),
    Case(
        "responses-sample-index-negative",
        responses_csv("m,edu_001,,A.,-1", header=RESPONSE_HEADER + ",sample_index"),
        ("sample_index: row 2 ('-1')", "a whole number from 0"),
    ),
    Case(
        "responses-sample-index-fraction",
        responses_csv("m,edu_001,,A.,1.5", header=RESPONSE_HEADER + ",sample_index"),
        ("sample_index: row 2 ('1.5')", "whole number"),
    ),
    Case(
        "responses-temperature-nan",
        responses_csv("m,edu_001,,A.,nan", header=RESPONSE_HEADER + ",temperature"),
        ("temperature: row 2 ('nan')", "a finite number >= 0"),
    ),
    Case(
        "responses-temperature-inf",
        responses_csv("m,edu_001,,A.,inf", header=RESPONSE_HEADER + ",temperature"),
        ("temperature: row 2 ('inf')", "a finite number >= 0"),
    ),
    Case(
        "responses-temperature-negative",
        responses_csv("m,edu_001,,A.,-5", header=RESPONSE_HEADER + ",temperature"),
        ("temperature: row 2 ('-5')", "a finite number >= 0"),
    ),
    Case(
        "responses-temperature-word",
        responses_csv("m,edu_001,,A.,warm", header=RESPONSE_HEADER + ",temperature"),
        ("temperature: row 2 ('warm')", "e.g. 0.7"),
    ),
    Case(
        "responses-empty-model",
        responses_csv(" ,edu_001,,A."),
        ("model_id: row 2", "must name the model"),
    ),
    # ---- responses: names off the taxonomy and query sets, with suggestions
    Case(
        "responses-disability-misspelt",
        responses_csv("m,edu_001,hearnig,A."),
        ("disability: row 2 ('hearnig')", "did you mean 'hearing'?"),
    ),
    Case(
        "responses-disability-unknown",
        responses_csv("m,edu_001,telepathy,A."),
        ("disability: row 2 ('telepathy')", "unknown disability", "leave it empty"),
    ),
    Case(
        "responses-query-id-misspelt",
        responses_csv("m,edu-001,,A."),
        ("query_id: row 2 ('edu-001')", "did you mean 'edu_001'?"),
    ),
    Case(
        "responses-query-set-misspelt",
        responses_csv("m,edu_001,,A.,ableaudt", header=RESPONSE_HEADER + ",query_set"),
        ("query_set: row 2 ('ableaudt')", "did you mean 'ableaudit'?"),
    ),
    Case(
        "responses-query-set-flag-unknown",
        responses("answers.csv", RESPONSE_HEADER + "\n" + R + "\n", "--query-set", "nope"),
        ("query_set: row 2 ('nope')", "no such query set", "ableaudit import queries"),
    ),
    Case(
        "responses-domain-disagrees",
        responses_csv("m,edu_001,,A.,finance", header=RESPONSE_HEADER + ",domain"),
        ("domain: row 2 ('finance')", "the query's own domain, 'education'"),
    ),
    Case(
        "responses-condition-disagrees",
        responses_csv("m,edu_001,,A.,disability", header=RESPONSE_HEADER + ",condition"),
        ("condition: row 2 ('disability')", "must agree with disability"),
    ),
    Case(
        "responses-duplicate-rows",
        responses_csv(R, "m,edu_001,,B."),
        ("row: row 3", "duplicates row 2", "distinct sample_index"),
    ),
    Case(
        "responses-many-errors-listed-with-a-count",
        responses_csv(
            *[f"m,edu_001,,A.,{-i}" for i in range(1, 26)], header=RESPONSE_HEADER + ",sample_index"
        ),
        ("25 row(s) cannot be imported", "sample_index: row 2 ('-1')", "and 20 more"),
    ),
    Case(
        "responses-one-line-per-field",
        responses_csv(
            "m,edu_001,,A.,banana,-1",
            "m,edu_001,hearing,A.,text,nan",
            header=RESPONSE_HEADER + ",task,temperature",
        ),
        ("2 row(s)", "task: row 2 ('banana')", "temperature: row 2 ('-1'), row 3 ('nan')"),
    ),
    # ---- responses: re-imports and audited units
    Case(
        "responses-corrected-text-without-replace",
        responses_csv(f"{GOOD_MODEL},edu_001,,A corrected answer."),
        (
            "1 row(s) are already landed with a different response_text",
            "row 2 [",
            "-> file 'A corrected answer.'",
            "--replace",
        ),
    ),
    Case(
        "responses-unit-an-audit-generated",
        responses_csv(
            f"{AUDITED_MODEL},edu_001,hearing,A.,0.1", header=RESPONSE_HEADER + ",temperature"
        ),
        ("an audit already generated", "model_id: rows 2", f"'{AUDITED_MODEL}-imported'"),
    ),
    # ---- responses: JSONL keeps JSON types
    Case(
        "responses-jsonl-text-object",
        responses("answers.jsonl", jsonl(answer(response_text={"answer": "A."}))),
        ("answers.jsonl", "response_text: row 1 ({'answer': 'A.'})", "must be a string"),
    ),
    Case(
        "responses-jsonl-text-number",
        responses("answers.jsonl", jsonl(answer(), answer(response_text=42, disability="vision"))),
        ("response_text: row 2 (42)", "serialise structured output"),
    ),
    Case(
        "responses-jsonl-text-list",
        responses("answers.jsonl", jsonl(answer(response_text=["A", "B"]))),
        ("response_text: row 1 (['A', 'B'])", "must be a string"),
    ),
    Case(
        "responses-jsonl-temperature-nan-literal",
        responses(
            "answers.jsonl",
            '{"model_id": "m", "query_id": "edu_001", "disability": "", '
            '"response_text": "A.", "temperature": NaN}\n',
        ),
        ("temperature: row 1 (nan)", "finite"),
    ),
    Case(
        "responses-jsonl-sample-index-bool",
        responses("answers.jsonl", jsonl(answer(sample_index=True))),
        ("sample_index: row 1 (True)", "whole number"),
    ),
    Case(
        "responses-jsonl-nul-escape",
        responses("answers.jsonl", jsonl(answer(response_text="A\u0000B"))),
        ("response_text: row 1", "NUL character", "remove it"),
    ),
    Case(
        "responses-jsonl-line-numbers-count-blank-lines",
        responses("answers.jsonl", jsonl(answer()) + "\n\n" + jsonl(answer(task="banana"))),
        ("task: row 4 ('banana')",),
    ),
    Case(
        "responses-jsonl-broken-line",
        responses("answers.jsonl", jsonl(answer()) + '{"model_id": "m", \n'),
        ("answers.jsonl", "line 2 is not valid JSON", "one JSON object per line"),
    ),
    Case(
        "responses-jsonl-array-line",
        responses("answers.jsonl", jsonl(answer()) + "[1, 2]\n"),
        ("line 2 holds a list", "one object per line"),
    ),
    # ---- responses: encodings and CSV shape
    Case(
        "responses-csv-nul-byte",
        responses("answers.csv", (RESPONSE_HEADER + "\n" + R + "\nm,edu_001,,A\x00B\n").encode()),
        ("answers.csv: line 3 holds a NUL byte", "save it as UTF-8"),
    ),
    Case(
        "responses-csv-binary-dump",
        responses("answers.csv", BINARY),
        ("answers.csv: line 1 holds a NUL byte", "not a text file"),
    ),
    Case(
        "responses-csv-utf16",
        responses("answers.csv", (RESPONSE_HEADER + "\n" + R + "\n").encode("utf-16")),
        ("answers.csv is encoded as UTF-16", "save it as UTF-8"),
    ),
    Case(
        "responses-csv-latin1",
        responses("answers.csv", (RESPONSE_HEADER + "\nm,edu_001,,Caf\u00e9.\n").encode("latin-1")),
        ("answers.csv: line 2 is not UTF-8", "byte 0xe9", "save it as UTF-8"),
    ),
    Case(
        "responses-csv-semicolons",
        responses("answers.csv", RESPONSE_HEADER.replace(",", ";") + "\nm;edu_001;;A.\n"),
        ("line 1 (the header) is one column", "separated by semicolons", "comma-separated"),
    ),
    Case(
        "responses-csv-tabs",
        responses("answers.csv", RESPONSE_HEADER.replace(",", "\t") + "\nm\tedu_001\t\tA.\n"),
        ("separated by tabs",),
    ),
    Case(
        "responses-csv-ragged-rows",
        responses_csv(R, "m,edu_001,hearing,Use captions, and notes.", "m,edu_001"),
        (
            "2 row(s) do not have one field per column",
            "line 3: 5 fields for 4 columns",
            "line 4: 2 fields for 4 columns",
            "Quote fields that hold commas",
        ),
    ),
    Case(
        "responses-csv-many-ragged-rows-listed-with-a-count",
        responses_csv(*[f"m,edu_001,,A.,{i}" for i in range(13)]),
        ("13 row(s) do not have one field per column", "line 11: 5 fields", "... and 3 more"),
    ),
    Case(
        "responses-csv-unclosed-quote",
        responses_csv(R, 'm,edu_001,hearing,"Use captions.'),
        ("answers.csv: line 3", "close the quote"),
    ),
    Case(
        "responses-csv-repeated-column",
        responses_csv("m,edu_001,,A.,B.", header=RESPONSE_HEADER + ",response_text"),
        ("line 1 (the header) repeats column(s) ['response_text']",),
    ),
    Case(
        "responses-csv-empty-column-name",
        responses_csv("m,edu_001,,A.,x", header=RESPONSE_HEADER + ","),
        ("empty column name at position(s) [5]",),
    ),
    Case(
        "responses-csv-missing-column",
        responses_csv("m,edu_001,", header="model_id,query_id,disability"),
        ("lacks required column(s) ['response_text']",),
    ),
    Case(
        "responses-csv-misspelt-extra-column",
        responses_csv("m,edu_001,,A.,0.7", header=RESPONSE_HEADER + ",temprature"),
        ("column(s) 'temprature' (did you mean 'temperature'?)", "rename them, or drop them"),
    ),
    Case(
        "responses-csv-empty-file",
        responses("answers.csv", ""),
        ("answers.csv is empty",),
    ),
    Case(
        "responses-csv-header-only",
        responses("answers.csv", RESPONSE_HEADER + "\n"),
        ("answers.csv holds no rows",),
    ),
    Case(
        "responses-csv-multiline-field-keeps-line-numbers",
        responses_csv(
            'm,edu_001,,"Line one.\nLine two."', "m,edu_001,hearing,A.,", header=RESPONSE_HEADER
        ),
        ("line 4: 5 fields for 4 columns",),
    ),
    Case(
        "responses-csv-bom-then-bad-value",
        responses("answers.csv", "\ufeff" + RESPONSE_HEADER + ",task\nm,edu_001,,A.,banana\n"),
        ("task: row 2 ('banana')",),
    ),
    Case(
        "responses-unsupported-suffix",
        responses("answers.xlsx", BINARY),
        ("unsupported file type '.xlsx'", "use .csv, .jsonl or .parquet"),
    ),
    Case(
        "responses-missing-file",
        lambda d, w: ["import", "responses", str(d / "nowhere.csv")],
        ("nowhere.csv does not exist; check the path",),
    ),
    Case(
        "responses-a-folder",
        lambda d, w: ["import", "responses", str(d)],
        ("is a folder, not a file; check the path",),
    ),
    # ---- responses: Parquet
    Case(
        "responses-parquet-corrupt",
        responses("answers.parquet", b"PAR1" + BINARY + b"PAR1"),
        ("answers.parquet is not a readable Parquet file", "write it again"),
    ),
    Case(
        "responses-parquet-struct-text",
        responses_parquet({"response_text": pa.array([{"answer": "A."}])}),
        ("response_text: row 1 ({'answer': 'A.'})", "must be a string"),
    ),
    Case(
        "responses-parquet-temperature-inf",
        responses_parquet({"temperature": pa.array([float("inf")])}),
        ("temperature: row 1 (inf)", "finite"),
    ),
    Case(
        "responses-parquet-sample-index-int64",
        responses_parquet({"sample_index": pa.array([99999999999], pa.int64())}),
        ("sample_index: row 1 (99999999999)", "2147483647"),
    ),
    # ---- queries
    Case(
        "queries-shadow-builtin-set",
        queries_csv(GOOD_QUERY, flags=("--query-set", "ableaudit")),
        ("query set 'ableaudit' is built in", "Choose another name"),
    ),
    Case(
        "queries-shadow-builtin-set-upper-case",
        queries_csv(GOOD_QUERY, flags=("--query-set", " ABLEAUDIT ")),
        ("is built in",),
    ),
    Case(
        "queries-set-name-with-spaces",
        queries_csv(GOOD_QUERY, flags=("--query-set", "my set")),
        ("--query-set 'my set' must be a name of letters, digits",),
    ),
    Case(
        "queries-binary-dump",
        queries("accesseval.csv", BINARY),
        ("accesseval.csv: line 1 holds a NUL byte", "save it as UTF-8"),
    ),
    Case(
        "queries-nul-byte",
        queries("accesseval.csv", (QUERY_HEADER + "\n" + GOOD_QUERY + "\x00\n").encode()),
        ("accesseval.csv: line 2 holds a NUL byte",),
    ),
    Case(
        "queries-latin1",
        queries(
            "accesseval.csv",
            (QUERY_HEADER + "\nCaf\u00e9?,Caf\u00e9 {disability}?,Media\n").encode("latin-1"),
        ),
        ("line 2 is not UTF-8",),
    ),
    Case(
        "queries-utf16",
        queries("accesseval.csv", (QUERY_HEADER + "\n" + GOOD_QUERY + "\n").encode("utf-16")),
        ("accesseval.csv is encoded as UTF-16",),
    ),
    Case(
        "queries-missing-domain-column",
        queries_csv("Q?,Q {disability}?", header="Neutral Query,Disability-Specific Query"),
        ("missing required column(s) 'Domain'",),
    ),
    Case(
        "queries-domain-misspelt",
        queries_csv("Q?,Q {disability}?,Educaton"),
        ("line 2: unknown domain 'Educaton' (did you mean 'education'?)", "--lenient"),
    ),
    Case(
        "queries-disability-misspelt",
        queries_csv("Q?,Q as a deaf person?,Media,hearnig", header=QUERY_HEADER + ",Disability"),
        ("line 2: unknown disability 'hearnig' (did you mean 'hearing'?)",),
    ),
    Case(
        "queries-ragged",
        queries_csv(GOOD_QUERY, "Q?,Q {disability}?,Media,extra"),
        ("line 3: 4 fields for 3 columns",),
    ),
    Case(
        "queries-semicolons",
        queries("accesseval.csv", QUERY_HEADER.replace(",", ";") + "\nQ?;Q {disability}?;Media\n"),
        ("separated by semicolons",),
    ),
    Case(
        "queries-conflicting-rows",
        queries_csv(
            "Q?,Q as a deaf person?,Media,hearing",
            "Q?,Q as a Deaf user?,Media,hearing",
            header=QUERY_HEADER + ",Disability",
        ),
        ("line 3: a second, different hearing query", "first on line 2"),
    ),
    Case(
        "queries-empty-file",
        queries("accesseval.csv", "\n\n"),
        ("accesseval.csv is empty",),
    ),
    # ---- images: crafted headers
    Case(
        "images-png-width-0xffffffff",
        manifest({"a.png": png(0xFFFFFFFF, 1)}, "a,a.png,chef,man,black"),
        ("manifest.csv", "line 2: a.png: its header claims 4294967295x1 pixels", "over the cap"),
    ),
    Case(
        "images-png-decompression-bomb",
        manifest({"a.png": png(100_000, 100_000)}, "a,a.png,chef,man,black"),
        ("line 2: a.png: its header claims 100000x100000 pixels", "decompression bomb"),
    ),
    Case(
        "images-png-zero-size",
        manifest({"a.png": png(0, 0)}, "a,a.png,chef,man,black"),
        ("a.png: its PNG header", "export the image again"),
    ),
    Case(
        "images-png-truncated",
        manifest({"a.png": b"\x89PNG\r\n\x1a\n\x00\x00"}, "a,a.png,chef,man,black"),
        ("line 2: a.png: its PNG header cannot be read",),
    ),
    Case(
        "images-jpeg-65535-square",
        manifest({"a.jpg": jpeg(65535, 65535)}, "a,a.jpg,chef,man,black"),
        ("line 2: a.jpg: its header claims 65535x65535 pixels", "resize it below the cap"),
    ),
    Case(
        "images-jpeg-truncated",
        manifest({"a.jpg": b"\xff\xd8\xff"}, "a,a.jpg,chef,man,black"),
        ("a.jpg: its JPEG header cannot be read",),
    ),
    Case(
        "images-webp-huge-canvas",
        manifest(
            {"a.webp": b"RIFF\x00\x00\x00\x00WEBPVP8X" + b"\x00" * 8 + b"\xff\x3f\x00" * 2},
            "a,a.webp,chef,man,black",
        ),
        ("line 2: a.webp: its header claims 16384x16384 pixels", "over the cap"),
    ),
    Case(
        "images-empty-file",
        manifest({"a.png": b""}, "a,a.png,chef,man,black"),
        ("a.png: not a PNG, JPEG, GIF or WebP image",),
    ),
    Case(
        "images-path-is-a-folder",
        manifest({"sub/a.png": OK_PNG}, "a,sub,chef,man,black"),
        ("line 2: 'sub' is not a file under",),
    ),
    Case(
        "images-not-an-image",
        manifest({"a.png": b"hello, I am text"}, "a,a.png,chef,man,black"),
        ("a.png: not a PNG, JPEG, GIF or WebP image",),
    ),
    Case(
        "images-one-bad-of-two-lands-nothing",
        manifest(
            {"a.png": OK_PNG, "b.png": png(100_000, 100_000)},
            "a,a.png,chef,man,black",
            "b,b.png,chef,woman,white",
        ),
        ("1 problem(s), nothing loaded", "line 3: b.png: its header claims"),
    ),
    # ---- images: file sizes, checked by stat() before a byte is read
    Case(
        "images-sparse-3gib-png",
        manifest({}, "a,a.png,chef,man,black", setup=_sparse("a.png", 3 << 30)),
        (
            "manifest.csv",
            "line 2: a.png: the file is 3,221,225,472 bytes (3,072.0 MiB), over the cap of "
            "52,428,800 bytes (50.0 MiB)",
            "`--max-image-bytes 3221225472`",
        ),
    ),
    Case(
        "images-one-byte-over-the-cap",
        manifest(
            {"a.png": OK_PNG},
            "a,a.png,chef,man,black",
            "b,b.png,chef,woman,white",
            setup=_sparse("b.png", 50 * 1024 * 1024 + 1),
        ),
        ("1 problem(s), nothing loaded", "line 3: b.png: the file is 52,428,801 bytes"),
    ),
    Case(
        "images-over-a-lowered-cap",
        with_flags(
            manifest({"a.png": OK_PNG}, "a,a.png,chef,man,black"), "--max-image-bytes", "16"
        ),
        (
            f"line 2: a.png: the file is {len(OK_PNG)} bytes",
            "over the cap of 16 bytes",
            "shrink or re-encode the image",
        ),
    ),
    Case(
        "images-pairs-sparse",
        pairs_tree(
            {"occupations/chef/black_man.png": OK_PNG},
            setup=_sparse("occupations/chef/white_man.png", 60_000_000),
        ),
        (
            "occupations/chef/white_man.png: the file is 60,000,000 bytes",
            "ABLEAUDIT_MAX_IMAGE_BYTES",
        ),
    ),
    # ---- images: paths
    Case(
        "images-path-traversal",
        manifest({"a.png": OK_PNG}, "a,../secret.png,chef,man,black", setup=_outside),
        ("line 2: image path '../secret.png' escapes the image root", "no '..'"),
    ),
    Case(
        "images-absolute-path",
        manifest({"a.png": OK_PNG}, "a,/etc/hostname,chef,man,black"),
        ("line 2: image path '/etc/hostname' escapes the image root",),
    ),
    Case(
        "images-symlink-out-of-root",
        manifest(
            {"a.png": OK_PNG},
            "a,link.png,chef,man,black",
            setup=lambda d: (_outside(d), _link(str(d / "secret.png"), "link.png")(d)),
        ),
        ("line 2: image path 'link.png' escapes the image root", "no links out of it"),
    ),
    Case(
        "images-symlink-loop",
        manifest({}, "a,a.png,chef,man,black", setup=_loop),
        ("line 2: image path 'a.png'",),
    ),
    Case(
        "images-missing-file",
        manifest({"a.png": OK_PNG}, "a,b.png,chef,man,black"),
        ("line 2: 'b.png' is not a file under",),
    ),
    # ---- images: the manifest itself
    Case(
        "images-manifest-nul-byte",
        manifest(
            {"a.png": OK_PNG}, raw=(MANIFEST_HEADER + "\na,a.png\x00,chef,man,black\n").encode()
        ),
        ("manifest.csv: line 2 holds a NUL byte",),
    ),
    Case(
        "images-manifest-missing-column",
        manifest({"a.png": OK_PNG}, "a,a.png,chef,man", header="image_id,path,scenario,gender"),
        ("lacks column(s) ['race']",),
    ),
    Case(
        "images-manifest-duplicate-id",
        manifest({"a.png": OK_PNG}, "a,a.png,chef,man,black", "a,a.png,chef,man,black"),
        ("line 3: image_id 'a' repeats line 2",),
    ),
    Case(
        "images-manifest-ragged",
        manifest({"a.png": OK_PNG}, "a,a.png,chef,man,black,extra"),
        ("line 2: 6 fields for 5 columns",),
    ),
    Case(
        "images-manifest-empty-cell",
        manifest({"a.png": OK_PNG}, ",a.png,chef,man,black"),
        ("line 2: empty ['image_id']",),
    ),
    Case(
        "images-manifest-without-root",
        lambda d, w: ["import", "images", str(write(d, "manifest.csv", MANIFEST_HEADER + "\n"))],
        ("is a manifest CSV: pass --image-root",),
    ),
    Case(
        "images-set-name",
        manifest({"a.png": OK_PNG}, "a,a.png,chef,man,black", image_set="my set"),
        ("image_set 'my set' must be a non-empty name",),
    ),
    # ---- images: a PAIRS tree
    Case(
        "images-pairs-misnamed-file",
        pairs_tree({"occupations/chef/black_man.png": OK_PNG, "occupations/chef/man1.png": OK_PNG}),
        ("occupations/chef/man1.png: file name is not <race>_<gender>[n].png",),
    ),
    Case(
        "images-pairs-bomb",
        pairs_tree({"occupations/chef/white_woman.png": png(100_000, 100_000)}),
        ("occupations/chef/white_woman.png: its header claims 100000x100000 pixels",),
    ),
    Case(
        "images-pairs-symlink-out",
        pairs_tree({"occupations/chef/white_man.png": OK_PNG}, setup=_tree_link_out),
        ("occupations/chef/black_man.png: image path", "escapes the image root"),
    ),
    # ---- annotations
    Case(
        "annotations-score-off-scale",
        annotations(
            "ratings.csv", lambda w: f"item_id,annotator_id,judge_score\n{w.neutral_id},ann1,11\n"
        ),
        ("ratings.csv", "row 2", "judge_score score '11' is outside [1, 10]"),
    ),
    Case(
        "annotations-score-nan",
        annotations(
            "ratings.csv", lambda w: f"item_id,annotator_id,judge_score\n{w.neutral_id},ann1,nan\n"
        ),
        ("row 2", "'nan' is not a number"),
    ),
    Case(
        "annotations-unknown-item",
        annotations(
            "ratings.csv", lambda w: "item_id,annotator_id,judge_score\nnot-an-id,ann1,5\n"
        ),
        ("row 2: item_id 'not-an-id' is neither a generation_id",),
    ),
    Case(
        "annotations-repeated-rating",
        annotations(
            "ratings.csv",
            lambda w: (
                f"item_id,annotator_id,judge_score\n{w.neutral_id},ann1,5\n{w.neutral_id},ann1,6\n"
            ),
        ),
        ("rows 2, 3",),
    ),
    Case(
        "annotations-missing-annotator",
        annotations("ratings.csv", lambda w: f"item_id,judge_score\n{w.neutral_id},5\n"),
        ("needs the columns item_id and annotator_id",),
    ),
    Case(
        "annotations-misspelt-dimension-column",
        annotations(
            "ratings.csv", lambda w: f"item_id,annotator_id,judge_scor\n{w.neutral_id},ann1,5\n"
        ),
        ("column(s) ['judge_scor'] are not dimensions",),
    ),
    Case(
        "annotations-pair-dimension-before-build",
        annotations(
            "ratings.csv", lambda w: f"item_id,annotator_id,interpret\n{w.neutral_id},ann1,No\n"
        ),
        ("no int_pairs yet", "run `ableaudit build` first"),
    ),
    Case(
        "annotations-long-misspelt-column",
        annotations(
            "ratings.csv",
            lambda w: (
                f"item_id,dimension,annotator_id,value,coments\n{w.neutral_id},judge_score,a,5,x\n"
            ),
        ),
        ("column(s) 'coments' (did you mean 'comments'?)",),
    ),
    Case(
        "annotations-binary",
        annotations("ratings.csv", lambda w: BINARY),
        ("ratings.csv: line 1 holds a NUL byte",),
    ),
    Case(
        "annotations-jsonl-object-value",
        annotations(
            "ratings.jsonl",
            lambda w: jsonl(
                {"item_id": w.neutral_id, "annotator_id": "ann1", "judge_score": {"v": 5}}
            ),
        ),
        ("ratings.jsonl: row 1: judge_score holds a dict",),
    ),
    Case(
        "annotations-semicolons",
        annotations(
            "ratings.csv", lambda w: f"item_id;annotator_id;judge_score\n{w.neutral_id};ann1;5\n"
        ),
        ("separated by semicolons",),
    ),
    # ---- judgments
    Case(
        "judgments-kind-misspelt",
        judgments(
            "verdicts.csv", lambda w: f"{JUDGMENT_HEADER}\nj,q,rubrik,{w.neutral_id},Score: 5\n"
        ),
        ("verdicts.csv", "row 2: kind 'rubrik'", "did you mean 'rubric'?"),
    ),
    Case(
        "judgments-unknown-generation",
        judgments("verdicts.csv", lambda w: f"{JUDGMENT_HEADER}\nj,q,rubric,nope,Score: 5\n"),
        ("row 2: generation_id 'nope' is not in raw.generations",),
    ),
    Case(
        "judgments-empty-output",
        judgments("verdicts.csv", lambda w: f"{JUDGMENT_HEADER}\nj,q,rubric,{w.neutral_id},\n"),
        ("row 2: raw_output is empty",),
    ),
    Case(
        "judgments-jsonl-output-object",
        judgments(
            "verdicts.jsonl",
            lambda w: jsonl(
                {
                    "judge_name": "j",
                    "judge_model": "q",
                    "kind": "rubric",
                    "generation_id": w.neutral_id,
                    "raw_output": {"score": 5},
                }
            ),
        ),
        ("row 1: raw_output must be text, not dict",),
    ),
    Case(
        "judgments-jsonl-nul",
        judgments(
            "verdicts.jsonl",
            lambda w: jsonl(
                {
                    "judge_name": "j",
                    "judge_model": "q",
                    "kind": "rubric",
                    "generation_id": w.neutral_id,
                    "raw_output": "Score:\u0000 5",
                }
            ),
        ),
        ("row 1: raw_output holds a NUL character",),
    ),
    Case(
        "judgments-duplicate-rows",
        judgments(
            "verdicts.csv",
            lambda w: (
                f"{JUDGMENT_HEADER}\nj,q,rubric,{w.neutral_id},Score: 5\n"
                f"j,q,rubric,{w.neutral_id},Score: 6\n"
            ),
        ),
        ("row 3: duplicates row 2",),
    ),
    Case(
        "judgments-missing-column",
        judgments(
            "verdicts.csv",
            lambda w: f"judge_name,kind,generation_id,raw_output\nj,rubric,{w.neutral_id},5\n",
        ),
        ("lacks required column(s) ['judge_model']",),
    ),
    Case(
        "judgments-misspelt-extra-column",
        judgments(
            "verdicts.csv",
            lambda w: f"{JUDGMENT_HEADER},judge_revison\nj,q,rubric,{w.neutral_id},Score: 5,r1\n",
        ),
        ("'judge_revison' (did you mean 'judge_revision'?)",),
    ),
    Case(
        "judgments-pair-reversed",
        judgments(
            "verdicts.csv",
            lambda w: (
                "judge_name,judge_model,kind,neutral_generation_id,disability_generation_id,"
                f"raw_output\nj,q,contrastive,{w.hearing_id},{w.neutral_id},A\n"
            ),
        ),
        ("row 2: neutral_generation_id must be a neutral generation",),
    ),
    Case(
        "judgments-parquet-corrupt",
        judgments("verdicts.parquet", lambda w: b"PAR1" + BINARY),
        ("verdicts.parquet is not a readable Parquet file",),
    ),
    Case(
        "judgments-parquet-number-output",
        lambda d, w: [
            "import",
            "judgments",
            str(
                parquet(
                    d,
                    "verdicts.parquet",
                    pa.table(
                        {
                            "judge_name": ["j"],
                            "judge_model": ["q"],
                            "kind": ["rubric"],
                            "generation_id": [w.neutral_id],
                            "raw_output": pa.array([7], pa.int64()),
                        }
                    ),
                )
            ),
        ],
        ("verdicts.parquet", "row 1: raw_output must be text, not int"),
    ),
    Case(
        "judgments-binary",
        judgments("verdicts.csv", lambda w: BINARY),
        ("verdicts.csv: line 1 holds a NUL byte",),
    ),
]
