"""Human annotations: a sample to annotate, and landing the ratings that come back.

``export_annotation_sample`` draws a stratified sample of responses (rubric) or
of neutral/disability-aware pairs (contrastive), balanced over domains and
disabilities (ableaudit.stats.stratified_sample; the AccessEval study used 200
responses per domain), and writes ``items.csv`` (one row per item, one empty
column per dimension, an ``annotator_id`` column) and ``instructions.md``: the
judge's own instructions, so humans and the LLM judge rate the same thing, the
scales, and how far each domain fell short of the requested size. Model names
are left out of the file on purpose: annotators rate blind.

``import_annotations`` lands a filled file in raw.annotations, where the
agreement marts read it (through int_ratings). The file is checked whole
before anything lands: unknown items, a dimension that does not fit the item
(judge_score rates a generation, the contrastive labels rate a pair), a value
off its scale (ableaudit.stats.SCALES) or a repeated rating stop the import
with one message listing the rows; the warehouse is left as it was. Landing
is idempotent: a rating's key is (item, dimension, annotator); importing the
same value again changes nothing, a different value replaces the old one and
the report lists it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from ableaudit.ingest import files
from ableaudit.ingest.annotation_instructions import DIMENSIONS, dimension_rows, instructions
from ableaudit.judges.dimensions import DimensionSet
from ableaudit.judges.dimensions import scales as dimension_scales
from ableaudit.keys import canonical_json, sha256_hex
from ableaudit.stats import (
    SCALES,
    normalize_labels,
    sample_shortfall,
    stratified_sample,
    validate_annotations,
)
from ableaudit.warehouse import connect, ibis_compat, warehouse_path
from ableaudit.warehouse.reference_landing import land_annotations

KINDS = ("rubric", "contrastive")
ITEM_KIND = {"rubric": "generation", "contrastive": "pair"}
DIMENSION_ITEM_KIND = {d: ITEM_KIND[k] for k, dims in DIMENSIONS.items() for d in dims}
TEXT_COLUMNS = {
    "rubric": ("query", "response"),
    "contrastive": ("question_a", "response_a", "question_b", "response_b"),
}
# columns of an exported sample that an import reads past (wide format), and
# free-text columns an annotator may add
CONTEXT_COLUMNS = {
    "item_kind",
    "sample_order",
    "domain",
    "disability_id",
    "query",
    "response",
    "question_a",
    "response_a",
    "question_b",
    "response_b",
    "comment",
    "comments",
    "notes",
}
MAX_LISTED = 20


# what each dimension asks of a human, next to the judge's own words
class AnnotationError(ValueError):
    """An export or import cannot proceed; the message says what to fix."""


# --------------------------------------------------------------------------- export


@dataclass(frozen=True)
class AnnotationSample:
    """What export_annotation_sample wrote."""

    items_path: Path
    instructions_path: Path
    kind: str
    n_items: int
    shortfall: list[dict[str, Any]]  # per domain: requested, available, sampled, shortfall

    @property
    def paths(self) -> list[Path]:
        return [self.items_path, self.instructions_path]


def _open_read_only(warehouse: str | Path | None):
    path = warehouse_path(warehouse)
    if not path.is_file():
        raise AnnotationError(f"no warehouse at {path}; run an audit (or `ableaudit build`) first")
    try:
        return ibis_compat.connect(path, read_only=True)
    except duckdb.IOException as err:
        raise AnnotationError(
            f"cannot read the warehouse {path} ({err}); close the process writing it and retry"
        ) from None


def _table(con, name: str, database: str | None = None):
    from ibis.common.exceptions import TableNotFound

    try:
        return con.table(name, database=database) if database else con.table(name)
    except TableNotFound:
        raise AnnotationError(
            f"the warehouse has no {name} yet; run `ableaudit build` first"
        ) from None


def _rubric_items(con, query_set: str | None, model_ids: Sequence[str] | None) -> pd.DataFrame:
    g = _table(con, "generations", "raw")
    g = g.filter((g.status == "ok") & (g.task == "text"))
    if query_set is not None:
        g = g.filter(g.query_set == query_set)
    if model_ids is not None:
        g = g.filter(g.model_id.isin(list(model_ids)))
    expr = g.select(
        item_id=g.generation_id,
        domain=g.domain,
        disability_id=g.disability_id,
        query=g.prompt_text,
        response=g.response_text,
    )
    return expr.to_pyarrow().to_pandas()


def _contrastive_items(con, query_set: str | None, model_ids: Sequence[str] | None) -> pd.DataFrame:
    p = _table(con, "int_pairs")
    p = p.filter(p.pair_status == "complete")
    if query_set is not None:
        p = p.filter(p.query_set == query_set)
    if model_ids is not None:
        p = p.filter(p.model_id.isin(list(model_ids)))
    g = _table(con, "generations", "raw")
    n = g.select(n_id=g.generation_id, question_a=g.prompt_text, response_a=g.response_text)
    d = g.select(d_id=g.generation_id, question_b=g.prompt_text, response_b=g.response_text)
    joined = p.join(n, p.neutral_generation_id == n.n_id).join(
        d, p.disability_generation_id == d.d_id
    )
    expr = joined.select(
        item_id=joined.pair_id,
        domain=joined.domain,
        disability_id=joined.disability_id,
        question_a=joined.question_a,
        response_a=joined.response_a,
        question_b=joined.question_b,
        response_b=joined.response_b,
    )
    return expr.to_pyarrow().to_pandas()


def _known_domains(con) -> list[str]:
    from ibis.common.exceptions import TableNotFound

    try:
        domains = con.table("stg_seeds__domains")
    except TableNotFound:
        return []
    return [str(d) for d in domains.select("domain_id").to_pyarrow().column(0).to_pylist() if d]


def export_annotation_sample(
    warehouse: str | Path | None,
    out_dir: str | Path,
    size_per_domain: int = 200,
    seed: int = 0,
    kind: str = "rubric",
    query_set: str | None = None,
    model_ids: Sequence[str] | None = None,
    dimensions: DimensionSet | None = None,
) -> AnnotationSample:
    """Write items.csv and instructions.md for annotators into out_dir.

    kind 'rubric': responses (text generations with status 'ok'), to score 1-10
    like the rubric judge; neutral responses are a stratum of their own.
    kind 'contrastive': complete neutral/disability-aware pairs (int_pairs), to
    label interpret, stereotype, framing and abstain like the contrastive judge,
    or the dimensions of ``dimensions`` (a judge's own set) and abstain.
    The same warehouse, size and seed give the same sample.
    """
    if kind not in KINDS:
        raise AnnotationError(f"unknown annotation kind {kind!r}; use one of {', '.join(KINDS)}")
    if dimensions is not None and kind != "contrastive":
        raise AnnotationError("a dimension set is rated on pairs: use kind contrastive with it")
    if int(size_per_domain) < 1:
        raise AnnotationError(f"size_per_domain must be at least 1, got {size_per_domain}")
    model_ids = list(model_ids) if model_ids else None
    con = _open_read_only(warehouse)
    try:
        items = (
            _rubric_items(con, query_set, model_ids)
            if kind == "rubric"
            else _contrastive_items(con, query_set, model_ids)
        )
        domains = _known_domains(con)
    finally:
        con.disconnect()
    if items.empty:
        scope = (
            ", ".join(
                f"{k}={v}" for k, v in (("query_set", query_set), ("model_ids", model_ids)) if v
            )
            or "any scope"
        )
        what = (
            "text responses with status 'ok'" if kind == "rubric" else "complete pairs (int_pairs)"
        )
        raise AnnotationError(
            f"no {what} to sample for {scope}; run an audit and `ableaudit build` first"
        )

    sample = stratified_sample(items, int(size_per_domain), seed=int(seed))
    shortfall = sample_shortfall(items, int(size_per_domain), domains=domains)
    rows = dimension_rows(kind, dimensions)
    dims = [name for name, _, _ in rows]
    out = sample.assign(item_kind=ITEM_KIND[kind], annotator_id="", **{d: "" for d in dims})
    columns = [
        "item_id",
        "item_kind",
        "domain",
        "disability_id",
        *TEXT_COLUMNS[kind],
        "annotator_id",
        *dims,
    ]

    target = Path(out_dir).expanduser()
    target.mkdir(parents=True, exist_ok=True)
    items_path = target / "items.csv"
    # a cell a spreadsheet would run (an answer starting with =HYPERLINK(...)) is written as text
    out[columns].map(files.escape_formula).to_csv(items_path, index=False)
    instructions_path = target / "instructions.md"
    instructions_path.write_text(
        instructions(
            kind,
            len(out),
            int(size_per_domain),
            int(seed),
            query_set,
            model_ids,
            shortfall,
            dimensions,
        ),
        encoding="utf-8",
    )
    return AnnotationSample(
        items_path=items_path,
        instructions_path=instructions_path,
        kind=kind,
        n_items=len(out),
        shortfall=shortfall.to_dict("records"),
    )


# --------------------------------------------------------------------------- import


@dataclass
class AnnotationImportReport:
    """What import_annotations did."""

    file: str
    batch_id: str
    format: str  # 'long' | 'wide'
    rows_read: int = 0
    ratings: int = 0  # non-empty ratings in the file
    not_rated: int = 0  # empty cells: not rated, nothing landed
    inserted: int = 0
    unchanged: int = 0  # already landed with the same value: no-op
    replaced: list[dict[str, Any]] = field(default_factory=list)  # changed values

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __str__(self) -> str:
        text = (
            f"{self.file}: {self.ratings} rating(s) ({self.format} format): {self.inserted} new, "
            f"{len(self.replaced)} replaced, {self.unchanged} unchanged; {self.not_rated} empty cell(s) not rated"
        )
        for r in self.replaced[:MAX_LISTED]:
            text += (
                f"\n  replaced {r['dimension']} of {r['item_id']} by {r['annotator_id']}: "
                f"{r['old_value']} -> {r['new_value']}"
            )
        if len(self.replaced) > MAX_LISTED:
            text += f"\n  ... and {len(self.replaced) - MAX_LISTED} more"
        return text


def _text(v: Any) -> str | None:
    """A cell as text: None for empty, numbers without a spurious '.0', booleans as true/false."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    s = str(v).strip()
    return s or None


def _read_file(path: Path) -> pd.DataFrame:
    """CSV (every column as text), JSONL/NDJSON or Parquet, as a frame of strings (None for
    empty) with `_row`: the row as a person finds it (a CSV's header is row 1; a JSONL line)."""
    numbered = files.read_numbered(path, AnnotationError)
    rows = [r for _, r in numbered]
    for n, r in numbered:
        nul = files.nul_fields(r)
        if nul:
            raise AnnotationError(
                f"{path}: row {n}: {', '.join(nul)} holds a NUL character (\\x00); remove it"
            )
        nested = [c for c, v in r.items() if isinstance(v, (dict, list))]
        if nested:
            raise AnnotationError(
                f"{path}: row {n}: {', '.join(nested)} holds a {type(r[nested[0]]).__name__}; "
                "a rating, an item id or an annotator id is one value"
            )
    columns = files.columns_of(rows)
    # a CSV is read as export_annotation_sample wrote it: escaped formulas come back as they were
    cell = files.unescape_formula if path.suffix.lower() == ".csv" else (lambda v: v)
    frame = pd.DataFrame(
        [{c: _text(cell(r.get(c))) for c in columns} for r in rows], columns=columns, dtype=object
    )
    frame.columns = [str(c).strip() for c in frame.columns]
    frame["_row"] = [n for n, _ in numbered]
    return frame


def _long_frame(
    raw: pd.DataFrame, path: Path, scales: dict[str, dict]
) -> tuple[pd.DataFrame, str, int]:
    """(item_id, dimension, annotator_id, value, _row) from a long or a wide file; and the empty cells."""
    cols = set(raw.columns)
    if "annotator_id" not in cols or "item_id" not in cols:
        raise AnnotationError(
            f"{path} needs the columns item_id and annotator_id; found {sorted(c for c in cols if c != '_row')}. "
            "Long format: item_id, dimension, annotator_id, value; wide format: item_id, annotator_id and one "
            f"column per dimension ({', '.join(scales)})"
        )
    if {"dimension", "value"} <= cols:
        known = ["item_id", "dimension", "annotator_id", "value", *sorted(CONTEXT_COLUMNS)]
        files.refuse_unknown_columns(
            path, [c for c in raw.columns if c != "_row"], known, AnnotationError
        )
        long = raw[["item_id", "dimension", "annotator_id", "value", "_row"]].copy()
        blank = long["value"].isna()
        return long[~blank].reset_index(drop=True), "long", int(blank.sum())
    dims = [c for c in raw.columns if c in scales]
    unknown = sorted(cols - set(dims) - CONTEXT_COLUMNS - {"item_id", "annotator_id", "_row"})
    if unknown or not dims:
        raise AnnotationError(
            f"{path}: column(s) {unknown or '(none)'} are not dimensions; a wide file has item_id, annotator_id "
            f"and one column per dimension ({', '.join(scales)}); a long file has dimension and value columns"
        )
    long = raw.melt(
        id_vars=["item_id", "annotator_id", "_row"],
        value_vars=dims,
        var_name="dimension",
        value_name="value",
    )
    blank = long["value"].isna()
    long = long[~blank].sort_values(["_row", "dimension"], kind="mergesort").reset_index(drop=True)
    return long[["item_id", "dimension", "annotator_id", "value", "_row"]], "wide", int(blank.sum())


def _renumber(message: str, rows: Sequence[int]) -> str:
    """validate_annotations numbers the frame's rows from 1; say the file's rows instead."""

    def file_row(m: re.Match) -> str:
        return str(rows[int(m.group(0)) - 1])

    message = re.sub(
        r"^row \d+", lambda m: "row " + re.sub(r"\d+", file_row, m.group(0)[4:]), message
    )
    message = re.sub(r"\(rows [\d, ]+\)", lambda m: re.sub(r"\d+", file_row, m.group(0)), message)
    return message.replace("rater_id", "annotator_id")


def annotation_key(item_id: str, dimension: str, annotator_id: str) -> str:
    """raw.annotations.annotation_id: sha256 of item, dimension and annotator."""
    return sha256_hex(canonical_json([item_id, dimension, annotator_id]))


def _canonical(dimension: str, value: str, scales: dict[str, dict]) -> tuple[str, float]:
    scale = scales[dimension]
    if scale["type"] == "score":
        x = float(value)
        return (str(int(x)) if x.is_integer() else repr(x)), x
    return value, float(list(scale["values"]).index(value))


def _item_kinds(
    con: duckdb.DuckDBPyConnection, ids: Iterable[str], need_pairs: bool
) -> dict[str, str]:
    ids = sorted(set(ids))
    found: dict[str, str] = {}
    con.register("annotation_item_ids", pd.DataFrame({"item_id": ids}, dtype=object))
    try:
        for (gid,) in con.execute(
            "select g.generation_id from raw.generations g "
            "inner join annotation_item_ids i on i.item_id = g.generation_id"
        ).fetchall():
            found[gid] = "generation"
        # fetchall: DuckDB 2 refuses new work on a connection while a result is half read
        has_pairs = con.execute(
            "select count(*) from information_schema.tables "
            "where table_schema = 'main' and table_name = 'int_pairs'"
        ).fetchall()[0][0]
        if has_pairs:
            for (pid,) in con.execute(
                "select p.pair_id from main.int_pairs p "
                "inner join annotation_item_ids i on i.item_id = p.pair_id"
            ).fetchall():
                found[pid] = "pair"
        elif need_pairs:
            raise AnnotationError(
                "the warehouse has no int_pairs yet, so pair ids cannot be checked; "
                "run `ableaudit build` first, then import"
            )
    finally:
        con.unregister("annotation_item_ids")
    return found


def rated_dimensions(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, dict], dict[str, str]]:
    """The dimensions an annotation may rate, with their scales and the kind of item each
    rates: the built-in ones (SCALES) and those of the judges' dimension sets in the warehouse
    (int_judge_dimensions, once built), which rate pairs."""
    scales, kinds = dict(SCALES), dict(DIMENSION_ITEM_KIND)
    built = con.execute(
        "select count(*) from information_schema.tables "
        "where table_schema = 'main' and table_name = 'int_judge_dimensions'"
    ).fetchall()[0][0]
    if built:
        cur = con.execute(
            "select dimension, answer_kind, value_labels, first_landed_at from main.int_judge_dimensions"
        )
        names = [c[0] for c in cur.description]
        defined = dimension_scales([dict(zip(names, r, strict=True)) for r in cur.fetchall()])
        for name, scale in defined.items():
            if name not in scales:
                scales[name], kinds[name] = scale, "pair"
    return scales, kinds


def import_annotations(
    file: str | Path, warehouse: str | Path | None = None
) -> AnnotationImportReport:
    """Validate a file of human ratings and land it in raw.annotations (all or nothing).

    The dimensions it may rate are the built-in ones and those of every dimension set the
    warehouse's contrastive verdicts were asked on (``rated_dimensions``)."""
    path = Path(file).expanduser()
    raw = _read_file(path)
    if raw.empty:
        raise AnnotationError(f"{path} holds no rows")
    con = connect(warehouse)
    try:
        scales, item_kind = rated_dimensions(con)
    finally:
        con.close()
    long, fmt, not_rated = _long_frame(raw, path, scales)
    batch_id = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    report = AnnotationImportReport(
        file=str(path),
        batch_id=batch_id,
        format=fmt,
        rows_read=len(raw),
        ratings=len(long),
        not_rated=not_rated,
    )
    if long.empty:
        raise AnnotationError(
            f"{path} holds no ratings (every dimension cell is empty); nothing was landed"
        )
    report.inserted, report.unchanged, report.replaced = land_ratings(
        long, warehouse, where=str(path), batch_id=batch_id, source_file=str(path)
    )
    return report


def land_ratings(
    long: pd.DataFrame,
    warehouse: str | Path | None,
    *,
    where: str,
    batch_id: str,
    source_file: str,
) -> tuple[int, int, list[dict[str, Any]]]:
    """Check ratings (columns item_id, dimension, annotator_id, value and ``_row``, the row a
    person finds each at in ``where``) against their scales and the warehouse's items, then land
    them in raw.annotations, all or nothing: (inserted, unchanged, replaced) as
    ``land_annotations`` returns them. A file import and a rating made in ``ableaudit view``
    both land through here."""
    con = connect(warehouse)
    try:
        scales, item_kind = rated_dimensions(con)
    finally:
        con.close()
    checked = normalize_labels(long.rename(columns={"annotator_id": "rater_id"}), scales)
    rows = checked["_row"].tolist()
    problems = [
        _renumber(m, rows)
        for m in validate_annotations(checked.drop(columns="_row"), scales, max_per_kind=MAX_LISTED)
    ]

    con = connect(warehouse)
    try:
        ok_ids = checked["item_id"].notna() & checked["dimension"].isin(list(item_kind))
        need_pairs = bool((checked.loc[ok_ids, "dimension"].map(item_kind) == "pair").any())
        kinds = _item_kinds(con, checked.loc[ok_ids, "item_id"], need_pairs)
        unknown, mismatch = [], []
        for rec in checked[ok_ids].to_dict("records"):
            want = item_kind[rec["dimension"]]
            have = kinds.get(rec["item_id"])
            if have is None:
                unknown.append(
                    f"row {rec['_row']}: item_id {rec['item_id']!r} is neither a generation_id "
                    "(raw.generations) nor a pair_id (int_pairs); copy item_id from the "
                    "exported sample unchanged"
                )
            elif have != want:
                mismatch.append(
                    f"row {rec['_row']}: {rec['dimension']} rates a {want}, but {rec['item_id']!r} "
                    f"is a {have} (judge_score rates generations; the contrastive dimensions "
                    "rate pairs)"
                )
        for msgs in (unknown, mismatch):
            problems += msgs[:MAX_LISTED]
            if len(msgs) > MAX_LISTED:
                problems.append(f"... and {len(msgs) - MAX_LISTED} more such row(s)")
        if problems:
            shown = "\n  ".join(problems)
            raise AnnotationError(
                f"{where}: {len(problems)} problem(s); nothing was landed:\n  {shown}"
            )

        landing = []
        for rec in checked.to_dict("records"):
            value, value_num = _canonical(rec["dimension"], rec["value"], scales)
            landing.append(
                {
                    "annotation_id": annotation_key(
                        rec["item_id"], rec["dimension"], rec["rater_id"]
                    ),
                    "item_id": rec["item_id"],
                    "item_kind": item_kind[rec["dimension"]],
                    "dimension": rec["dimension"],
                    "annotator_id": rec["rater_id"],
                    "value": value,
                    "value_num": value_num,
                    "batch_id": batch_id,
                    "source_file": source_file,
                }
            )
    finally:
        con.close()
    return land_annotations(warehouse, landing)
