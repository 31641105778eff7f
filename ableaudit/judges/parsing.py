"""Turning a judge's text into a verdict, or saying plainly that we could not.

The parser reads the judge's raw output ONLY. The subject (the response under
test) never reaches the extraction step, so a response that contains
"Score: 10" or a fake JSON verdict cannot be mistaken for the judge's verdict;
the response text is used afterwards for one thing alone, checking that the
spans the contrastive judge quotes really occur in response B.

Rules, in order (each outcome carries notes with a stable code, see NOTE_CODES):

1. Find JSON objects in the output: every ``{`` that starts a complete, strictly
   valid JSON object (whole output, a fenced ```json block, or an object with
   prose around it: all the same to the scanner), and every ``{`` that starts
   something object-like that does not decode (``{"``, ``{'`` or ``{key:``).
2. Exactly one distinct complete object and nothing else object-like:
   ``parsed``. Several copies of the same object count as one. Two different
   objects, or a complete one next to a broken one: ``unparseable``
   (``multiple_json_objects``): we cannot know which one the judge meant, and
   one of them may be a verdict quoted from the response.
3. No complete object, one broken one: repair it. A truncated object (never
   closed) is cut at its last top-level comma, so a half-written field
   (``"score": 1`` that was going to be ``10``) is dropped rather than trusted;
   anything still invalid goes through the ``json_repair`` library. The result
   is ``repaired`` only if it then validates; otherwise ``unparseable``.
4. Duplicate keys with different values (``{"score": 2, "score": 9}``) are
   ``unparseable``: a plain ``json.loads`` would silently keep the last one.
5. Validate against the schema (``schemas.py``). Numbers out of range, strings
   where numbers belong, missing required fields, labels other than
   No/Ambiguous/Yes: ``unparseable``. Never clamped, never coerced, never
   defaulted to "No". One forgiveness: a label differing only in case or
   surrounding whitespace (``"yes"``, ``" YES "``) is normalised, and the
   verdict is ``repaired`` with a ``label_normalised`` note.
6. Rubric score rule: the stored ``score`` is 1 when ``declined`` is true, else
   relevance + completeness + accuracy + clarity (0..10) floored at 1, so it
   always lies in the paper's 1..10. The judge's own total is kept as
   ``stated_score``; when it differs, a ``score_mismatch`` note says so (the
   status stays what extraction made it: the criteria are the judge's own).
7. Contrastive spans: each ``*_spans`` item must occur in response B
   (Unicode-normalised, case- and whitespace-insensitive, surrounding quotes
   and ellipses ignored, an inner "..." read as a gap). One that does not is a
   ``span_not_found`` note and counts in ``spans_not_found``; a label ``Yes``
   (an answer that flags the pair) with no span is a ``yes_without_spans`` note.
   Neither changes the status.

A contrastive verdict is read against the judge's dimension set (``dimensions``:
its answers, scales and span lists; default: the built-in set), the same rules
for every set.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import json_repair
from jsonschema import Draft202012Validator

from ableaudit.judges.dimensions import DimensionSet, default_set
from ableaudit.judges.schemas import (
    RUBRIC_CRITERIA,
    RUBRIC_FIELDS,
    RUBRIC_SCHEMA,
    contrastive_fields,
    contrastive_schema,
)
from ableaudit.keys import canonical_json

PARSE_STATUSES = ("parsed", "repaired", "unparseable")

# The codes that start every note ("code: detail"); SQL can count them.
NOTE_CODES = {
    "empty_output": "the judge returned nothing but whitespace (unparseable)",
    "no_json_object": "no JSON object in the output (unparseable)",
    "multiple_json_objects": "more than one distinct JSON object, or a complete and a broken one (unparseable)",
    "duplicate_key": "a key repeated with different values (unparseable)",
    "not_repairable": "a broken object that json_repair could not turn into one object (unparseable)",
    "schema": "the object does not validate against the verdict schema (unparseable)",
    "identical_objects": "the same object written more than once (kept once)",
    "text_outside_json": "prose or code fences around the object (ignored)",
    "truncated": "the object was never closed; its incomplete last field was dropped (repaired)",
    "json_repaired": "the json_repair library fixed the object's syntax (repaired)",
    "label_normalised": "a label differed from the dimension's labels only in case or spaces (repaired)",
    "extra_fields_ignored": "keys outside the schema were dropped from the stored verdict",
    "score_mismatch": "the judge's total differs from the rubric rule; the rule's score is stored",
    "span_not_found": "a quoted span does not occur in response B",
    "yes_without_spans": "a dimension answered Yes (an answer that flags the pair) with no supporting span",
    "spans_unchecked": "response B was not available, spans were not checked",
    "judge_truncated": "the judge stopped at its max_new_tokens (added by the runner)",
}


@dataclass
class Verdict:
    parse_status: str  # 'parsed' | 'repaired' | 'unparseable'
    data: dict[str, Any] | None  # the validated verdict; None when unparseable
    notes: list[str] = field(default_factory=list)
    spans_not_found: int = 0

    def __post_init__(self) -> None:
        if self.parse_status not in PARSE_STATUSES:
            raise ValueError(
                f"parse_status must be one of {PARSE_STATUSES}, got {self.parse_status!r}"
            )
        if (self.parse_status == "unparseable") != (self.data is None):
            raise ValueError(
                "an unparseable verdict has no data, and a parsed or repaired one has data"
            )

    @property
    def parsed_json(self) -> str | None:
        return None if self.data is None else canonical_json(self.data)

    @property
    def notes_json(self) -> str:
        return json.dumps(self.notes, ensure_ascii=False)

    @property
    def codes(self) -> list[str]:
        return [n.split(":", 1)[0] for n in self.notes]


class _DuplicateKey(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out and out[k] != v:
            raise _DuplicateKey(k)
        out[k] = v
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_reject_constant)
_OBJECT_START = re.compile(r"\{\s*(?:\"|'|[A-Za-z_][\w ]{0,40}:)")
_FENCE = re.compile(r"```[A-Za-z]*")


def _unparseable(*notes: str) -> Verdict:
    return Verdict("unparseable", None, list(notes))


@dataclass
class _Scan:
    closed_at: int  # index of the closing brace, -1 if never closed
    last_top_comma: int  # index of the last comma directly inside the object, -1 if none
    duplicate_keys: list[str]


def _scan(cand: str) -> _Scan:
    """Walk one object's text (starting at '{') tracking strings and depth."""
    m = re.match(r"\{\s*(['\"])", cand)
    quote = m.group(1) if m else '"'
    depth, in_str, esc = 0, False, False
    str_start, last_comma = -1, -1
    keys: list[str] = []
    for i, ch in enumerate(cand):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                in_str = False
                if depth == 1:
                    rest = cand[i + 1 : i + 20].lstrip()
                    if rest.startswith(":"):
                        keys.append(cand[str_start + 1 : i])
            continue
        if ch == quote:
            in_str, str_start = True, i
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                dup = sorted({k for k in keys if keys.count(k) > 1})
                return _Scan(i, last_comma, dup)
        elif ch == "," and depth == 1:
            last_comma = i
    return _Scan(-1, last_comma, sorted({k for k in keys if keys.count(k) > 1}))


def extract_object(raw_output: str | None) -> tuple[dict[str, Any] | None, bool, list[str]]:
    """The one JSON object in a judge's output: (object or None, repaired?, notes)."""
    if raw_output is None or not raw_output.strip():
        return None, False, ["empty_output: the judge's output is empty"]
    text = raw_output
    complete: list[tuple[int, int, dict[str, Any]]] = []
    broken: list[int] = []
    i = 0
    while (j := text.find("{", i)) >= 0:
        try:
            obj, end = _DECODER.raw_decode(text, j)
        except _DuplicateKey as err:
            return None, False, [f"duplicate_key: {str(err)!r} appears twice with different values"]
        except ValueError:
            if _OBJECT_START.match(text, j):
                broken.append(j)
            i = j + 1
            continue
        complete.append((j, end, obj))
        i = end
    distinct = {canonical_json(o): o for _, _, o in complete}
    if len(distinct) > 1:
        return (
            None,
            False,
            [
                f"multiple_json_objects: {len(distinct)} different JSON objects; cannot tell which is the verdict"
            ],
        )
    if distinct:
        # a broken object-like start outside the complete object is a second candidate
        start, end, obj = complete[0]
        if broken:
            return (
                None,
                False,
                [
                    "multiple_json_objects: a complete JSON object and a broken one; cannot tell which is the verdict"
                ],
            )
        notes = []
        if len(complete) > 1:
            notes.append(f"identical_objects: the same object appears {len(complete)} times")
        outside = text
        for s, e, _ in sorted(complete, reverse=True):
            outside = outside[:s] + outside[e:]
        if _FENCE.sub("", outside).strip():
            notes.append("text_outside_json: prose around the JSON object was ignored")
        return obj, False, notes

    if not broken:
        return None, False, ["no_json_object: no JSON object in the output"]
    start = broken[0]
    cand = text[start:]
    scan = _scan(cand)
    notes: list[str] = []
    if scan.closed_at >= 0:
        piece = cand[: scan.closed_at + 1]
        later = [b for b in broken[1:] if b > start + scan.closed_at]
        if later:
            return (
                None,
                False,
                ["multiple_json_objects: more than one object-like block in the output"],
            )
        if _FENCE.sub("", text[:start] + cand[scan.closed_at + 1 :]).strip():
            notes.append("text_outside_json: prose around the JSON object was ignored")
    elif scan.last_top_comma > 0:
        piece = cand[: scan.last_top_comma] + "}"
        notes.append(
            "truncated: the object was never closed; its incomplete last field was dropped"
        )
    else:
        return None, False, ["truncated: the object was never closed and holds no complete field"]
    if scan.duplicate_keys:
        return None, False, [f"duplicate_key: {scan.duplicate_keys} appear more than once"]
    try:
        obj = _DECODER.decode(piece)
    except _DuplicateKey as err:
        return None, False, [f"duplicate_key: {str(err)!r} appears twice with different values"]
    except ValueError:
        try:
            obj = json_repair.loads(piece)
        except Exception as err:  # the library's own failure is an unparseable verdict, not a crash
            return None, False, [f"not_repairable: json_repair failed ({type(err).__name__})"]
        if isinstance(obj, list):
            return None, False, ["multiple_json_objects: the repaired text holds several values"]
        if not isinstance(obj, dict) or not obj:
            return None, False, ["not_repairable: json_repair did not produce a JSON object"]
        notes.append("json_repaired: the object's JSON syntax was repaired with json_repair")
    return obj, True, notes


def _schema_notes(validator: Draft202012Validator, obj: dict[str, Any]) -> list[str]:
    notes = []
    for err in sorted(validator.iter_errors(obj), key=lambda e: (list(e.path), e.message)):
        where = ".".join(str(p) for p in err.path) or "(object)"
        notes.append(f"schema: {where}: {err.message[:200]}")
    return notes


_RUBRIC_VALIDATOR = Draft202012Validator(RUBRIC_SCHEMA)
_CONTRASTIVE_VALIDATORS: dict[str, Draft202012Validator] = {}


def _contrastive_validator(dims: DimensionSet) -> Draft202012Validator:
    key = canonical_json(dims.model_dump())
    if key not in _CONTRASTIVE_VALIDATORS:
        _CONTRASTIVE_VALIDATORS[key] = Draft202012Validator(contrastive_schema(dims))
    return _CONTRASTIVE_VALIDATORS[key]


def _extra(obj: dict[str, Any], known: tuple[str, ...]) -> list[str]:
    extra = sorted(k for k in obj if k not in known)
    return [f"extra_fields_ignored: {extra}"] if extra else []


def parse_rubric(raw_output: str | None) -> Verdict:
    """A rubric verdict from the judge's text alone."""
    obj, repaired, notes = extract_object(raw_output)
    if obj is None:
        return _unparseable(*notes)
    errors = _schema_notes(_RUBRIC_VALIDATOR, obj)
    if errors:
        return _unparseable(*notes, *errors)
    points = {c: int(obj[c]) for c in RUBRIC_CRITERIA}
    declined = bool(obj["declined"])
    stated = int(obj["score"])
    score = 1 if declined else max(1, sum(points.values()))
    notes += _extra(obj, tuple(k for k in RUBRIC_FIELDS if k not in ("stated_score",)))
    if stated != score:
        why = (
            "declined answers score 1"
            if declined
            else f"{'+'.join(str(v) for v in points.values())} = {sum(points.values())}"
        )
        notes.append(
            f"score_mismatch: the judge said {stated}; the rule gives {score} ({why}); {score} is stored"
        )
    data = {
        **points,
        "declined": declined,
        "score": score,
        "stated_score": stated,
        "rationale": obj.get("rationale") or "",
    }
    return Verdict("repaired" if repaired else "parsed", data, notes)


def parse_contrastive(
    raw_output: str | None,
    response_b: str | None = None,
    dimensions: DimensionSet | None = None,
) -> Verdict:
    """A contrastive verdict from the judge's text, read against ``dimensions`` (default: the
    built-in set); ``response_b`` only checks the quoted spans."""
    dims = dimensions or default_set()
    obj, repaired, notes = extract_object(raw_output)
    if obj is None:
        return _unparseable(*notes)
    for d in dims.dimensions:
        if d.labels is None:
            continue
        canon = {label.lower(): label for label in d.labels}
        value = obj.get(d.name)
        if isinstance(value, str) and value not in d.labels and value.strip().lower() in canon:
            obj[d.name] = canon[value.strip().lower()]
            notes.append(f"label_normalised: {d.name} {value!r} read as {obj[d.name]!r}")
            repaired = True
    errors = _schema_notes(_contrastive_validator(dims), obj)
    if errors:
        return _unparseable(*notes, *errors)
    notes += _extra(obj, contrastive_fields(dims))
    spanned = [d.name for d in dims.dimensions if d.spans]
    data: dict[str, Any] = {"content_differences": obj.get("content_differences") or ""}
    for d in dims.dimensions:
        # a whole number written 2.0 is the integer JSON Schema reads it as
        data[d.name] = obj[d.name] if d.labels is not None else int(obj[d.name])
        if d.spans:
            data[f"{d.name}_spans"] = list(obj.get(f"{d.name}_spans", []))
    data["decline_in_response_a"] = obj["decline_in_response_a"]
    data["decline_in_response_b"] = obj["decline_in_response_b"]
    data["decline_explanation"] = obj.get("decline_explanation") or ""
    missing = 0
    if response_b is None:
        if any(data[f"{d}_spans"] for d in spanned):
            notes.append("spans_unchecked: response B was not given to the parser")
    else:
        haystack = normalise_text(response_b)
        for dim in spanned:
            for k, span in enumerate(data[f"{dim}_spans"]):
                if not span_in_text(span, haystack, normalised=True):
                    missing += 1
                    notes.append(f"span_not_found: {dim}_spans[{k}] {span[:80]!r}")
    for d in dims.dimensions:
        flagged = d.values[d.flag_position :]
        if d.spans and str(data[d.name]) in flagged and not data[f"{d.name}_spans"]:
            notes.append(f"yes_without_spans: {d.name} is {data[d.name]} with no supporting span")
    return Verdict("repaired" if repaired else "parsed", data, notes, spans_not_found=missing)


def parse_verdict(
    kind: str,
    raw_output: str | None,
    response_b: str | None = None,
    dimensions: DimensionSet | None = None,
) -> Verdict:
    if kind == "rubric":
        return parse_rubric(raw_output)
    if kind == "contrastive":
        return parse_contrastive(raw_output, response_b, dimensions)
    raise ValueError(f"judge kind must be 'rubric' or 'contrastive', got {kind!r}")


_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u00a0": " ",
    }
)
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026)\s*")


def normalise_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return re.sub(r"\s+", " ", text).strip()


def span_in_text(span: str, text: str, normalised: bool = False) -> bool:
    """Does a quoted span occur in the text? An inner '...' is a gap; the pieces must appear in order."""
    hay = text if normalised else normalise_text(text)
    s = normalise_text(span).strip(" \"'`")
    s = _ELLIPSIS.sub("\u2026", s).strip("\u2026 \"'").rstrip(".,;:!?")
    if not s:
        return False
    pos = 0
    for piece in (p.strip(" \"'") for p in s.split("\u2026")):
        if not piece:
            continue
        at = hay.find(piece, pos)
        if at < 0:
            return False
        pos = at + len(piece)
    return True
