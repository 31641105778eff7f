"""Rating an answer where it is read, blind to the model, landed as a human annotation.

An item is what ``ableaudit export annotation-sample`` offers annotators: for the rubric, a
text answer with status 'ok' (a generation), scored 1-10 like the rubric judge; for the
contrastive labels, a complete pair (int_pairs), labelled like the contrastive judge. The page
shows what the exported file shows (domain, disability, question, answer) and nothing of the
model, arm or run. The item is read from the published copy; the rating is checked and landed
in the live warehouse by ``ableaudit.ingest.annotations.land_ratings``, the code a file import
goes through, inside one landing (kind 'view-rating') that ``ableaudit history`` lists and
``ableaudit forget`` undoes. The live file is opened only for that write (the landing layer
waits while a build holds it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ableaudit.ingest.annotation_instructions import DIMENSION_HELP, judge_instructions
from ableaudit.ingest.annotations import DIMENSIONS, ITEM_KIND, land_ratings
from ableaudit.keys import canonical_json
from ableaudit.stats import SCALES
from ableaudit.viewer.sources import Reader, Sources, ViewerError
from ableaudit.warehouse.landing import recording

LANDING_KIND = "view-rating"
SOURCE_FILE = "ableaudit view"
MAX_ANNOTATOR = 100
PROMPTS = {"rubric": ("rubric_neutral", "rubric_disability"), "contrastive": ("contrastive",)}


@dataclass
class Item:
    """What an annotator sees of one item."""

    kind: str
    """'rubric' (an answer) or 'contrastive' (a pair of answers)."""
    item_id: str
    """The generation_id or pair_id the rating lands under."""
    domain: str | None
    disability_id: str | None
    texts: list[tuple[str, str]] = field(default_factory=list)
    """(label, text) in the order the exported sample's columns give them."""


@dataclass
class Landed:
    """What landing one rating did."""

    landing_id: str | None
    """The landing's id; None when every value had landed already (no landing then)."""
    inserted: int
    unchanged: int
    replaced: int


def dimensions(kind: str) -> list[dict[str, Any]]:
    """The form's questions: each dimension with its values and what it asks."""
    out = []
    for d in DIMENSIONS[kind]:
        scale = SCALES[d]
        values = (
            [str(v) for v in range(scale["min"], scale["max"] + 1)]
            if scale["type"] == "score"
            else list(scale["values"])
        )
        out.append({"name": d, "choices": values, "help": DIMENSION_HELP[d]})
    return out


def instructions(kind: str) -> list[tuple[str, str]]:
    """The judges' own criteria, as the exported instructions give them to annotators."""
    return [(name, judge_instructions(name)) for name in PROMPTS[kind]]


def item(reader: Reader, kind: str, item_id: str) -> Item | None:
    """The item, if the published copy has it and it may be rated (as the export samples)."""
    if kind == "rubric" and reader.has("raw.generations"):
        rows = reader.rows(
            "select generation_id, domain, disability_id, prompt_text, response_text "
            "from raw.generations where generation_id = ? and status = 'ok' and task = 'text'",
            [item_id],
        )
        if rows:
            r = rows[0]
            texts = [("Question", r["prompt_text"]), ("Answer", r["response_text"])]
            return Item(kind, item_id, r["domain"], r["disability_id"], texts)
    if kind == "contrastive" and reader.has("main.int_pairs") and reader.has("raw.generations"):
        rows = reader.rows(
            "select p.pair_id, p.domain, p.disability_id, n.prompt_text as question_a, "
            "n.response_text as response_a, d.prompt_text as question_b, "
            "d.response_text as response_b from int_pairs p "
            "inner join raw.generations n on n.generation_id = p.neutral_generation_id "
            "inner join raw.generations d on d.generation_id = p.disability_generation_id "
            "where p.pair_id = ? and p.pair_status = 'complete'",
            [item_id],
        )
        if rows:
            r = rows[0]
            texts = [
                ("Question A (neutral)", r["question_a"]),
                ("Answer A", r["response_a"]),
                ("Question B (disability mentioned)", r["question_b"]),
                ("Answer B", r["response_b"]),
            ]
            return Item(kind, item_id, r["domain"], r["disability_id"], texts)
    return None


def next_item(
    reader: Reader, kind: str, annotator: str, rated: set[str], after: str = ""
) -> str | None:
    """An item ``annotator`` has not rated (in the copy, nor since it was published: ``rated``),
    in an order of its own per annotator that says nothing of the model; the one following
    ``after`` in that order (an item skipped), from the start again past the last."""
    done = set(rated) | ({after} if after else set())
    if annotator and reader.has("raw.annotations"):
        done |= set(
            reader.values(
                "select distinct item_id from raw.annotations where annotator_id = ? "
                "and item_kind = ?",
                [annotator, ITEM_KIND[kind]],
            )
        )
    if kind == "rubric":
        if not reader.has("raw.generations"):
            return None
        source = (
            "select generation_id as item_id from raw.generations "
            "where status = 'ok' and task = 'text'"
        )
    else:
        if not reader.has("main.int_pairs"):
            return None
        source = "select pair_id as item_id from int_pairs where pair_status = 'complete'"
    found = reader.values(
        f"select item_id from ({source}) where not list_contains(?::varchar[], item_id) "
        "order by md5(item_id || ?) <= md5(? || ?), md5(item_id || ?) limit 1",
        [sorted(done), annotator, after, annotator, annotator],
    )
    return found[0] if found else None


def clean_annotator(value: str) -> str:
    """The annotator id as given, trimmed; one clear error when it cannot be one."""
    text = " ".join(value.split())
    if not text:
        raise ViewerError("Give your annotator id: the same on every rating you make.")
    if len(text) > MAX_ANNOTATOR:
        raise ViewerError(f"An annotator id is at most {MAX_ANNOTATOR} characters.")
    return text


def land_rating(
    sources: Sources, kind: str, item_id: str, annotator: str, values: Mapping[str, str]
) -> Landed:
    """Check and land one annotator's values on one item, as one landing."""
    if sources.live is None:
        raise ViewerError(
            f"ratings land in the live warehouse, and none is beside {sources.published}; "
            "start the viewer with --warehouse naming the live file"
        )
    given = {d: v for d in DIMENSIONS[kind] if (v := (values.get(d) or "").strip())}
    if not given:
        raise ViewerError("Choose a value for at least one question; nothing was landed.")
    long = pd.DataFrame(
        [
            {"item_id": item_id, "dimension": d, "annotator_id": annotator, "value": v, "_row": i}
            for i, (d, v) in enumerate(given.items(), start=1)
        ],
        dtype=object,
    )
    batch = hashlib.sha256(canonical_json([kind, item_id, annotator, given]).encode()).hexdigest()
    source = f"{SOURCE_FILE}: {annotator} rated {ITEM_KIND[kind]} {item_id[:16]}"
    with recording(sources.live, LANDING_KIND, source) as current:
        inserted, unchanged, replaced = land_ratings(
            long, sources.live, where="the rating", batch_id=batch[:16], source_file=SOURCE_FILE
        )
    return Landed(current.landing_id if current.rows else None, inserted, unchanged, len(replaced))
