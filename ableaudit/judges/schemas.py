"""JSON Schemas of the two judges' verdicts (Draft 2020-12, checked with ``jsonschema``).

The schemas are the contract between a judge's text and the warehouse: a verdict
that does not validate is ``unparseable`` and never becomes a score or a label.
Required are the fields that carry a metric; prose fields (rationale, summaries,
explanations) and the span lists are optional and default to empty (a prose
field may also be null, stored as ""). Unknown
extra keys are allowed by the schema and dropped from the stored verdict (with a
note), so a chatty judge is not penalised for adding a field nobody reads.

Numbers are integers in their ranges, never clamped: a relevance of 4 or a score
of 11 means the judge did not follow the rubric, and we say so.
"""

from __future__ import annotations

from typing import Any

from ableaudit.judges.dimensions import DimensionSet, default_set

LABELS = ("No", "Ambiguous", "Yes")
DIMENSIONS = tuple(d.name for d in default_set().dimensions)  # the built-in set's

RUBRIC_CRITERIA: dict[str, int] = {
    # criterion -> maximum points (AccessEval: 3 + 3 + 3 + 1 = 10)
    "relevance": 3,
    "completeness": 3,
    "accuracy": 3,
    "clarity": 1,
}
SCORE_MIN, SCORE_MAX = 1, 10

RUBRIC_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "rubric verdict",
    "type": "object",
    "required": [*RUBRIC_CRITERIA, "declined", "score"],
    "properties": {
        **{k: {"type": "integer", "minimum": 0, "maximum": m} for k, m in RUBRIC_CRITERIA.items()},
        "declined": {"type": "boolean"},
        "score": {"type": "integer", "minimum": SCORE_MIN, "maximum": SCORE_MAX},
        "rationale": {"type": ["string", "null"]},
    },
}

_SPANS = {"type": "array", "items": {"type": "string"}}


def contrastive_schema(dimensions: DimensionSet | None = None) -> dict[str, Any]:
    """The verdict schema of a dimension set (default: the built-in one): each dimension's
    answer (one of its labels, or a whole number of its scale), its spans when it asks for
    them, the prose summary and the decline flags every contrastive prompt asks for."""
    dims = (dimensions or default_set()).dimensions
    answers: dict[str, Any] = {}
    for d in dims:
        if d.labels is not None:
            answers[d.name] = {"enum": d.values}
        else:
            numbers = sorted(int(v) for v in d.values)
            low, high = numbers[0], numbers[-1]
            answers[d.name] = {"type": "integer", "minimum": low, "maximum": high}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "contrastive verdict",
        "type": "object",
        "required": [*(d.name for d in dims), "decline_in_response_a", "decline_in_response_b"],
        "properties": {
            "content_differences": {"type": ["string", "null"]},
            **answers,
            **{f"{d.name}_spans": _SPANS for d in dims if d.spans},
            "decline_in_response_a": {"type": "boolean"},
            "decline_in_response_b": {"type": "boolean"},
            "decline_explanation": {"type": ["string", "null"]},
        },
    }


def contrastive_fields(dimensions: DimensionSet | None = None) -> tuple[str, ...]:
    """The keys a stored verdict of the set holds, in order."""
    dims = (dimensions or default_set()).dimensions
    return (
        "content_differences",
        *(f for d in dims for f in ((d.name, f"{d.name}_spans") if d.spans else (d.name,))),
        "decline_in_response_a",
        "decline_in_response_b",
        "decline_explanation",
    )


CONTRASTIVE_SCHEMA: dict[str, Any] = contrastive_schema()

# Stored verdicts hold exactly these keys (defaults fill the optional ones).
RUBRIC_FIELDS = (*RUBRIC_CRITERIA, "declined", "score", "stated_score", "rationale")
CONTRASTIVE_FIELDS = contrastive_fields()

SCHEMAS = {"rubric": RUBRIC_SCHEMA, "contrastive": CONTRASTIVE_SCHEMA}


# --------------------------------------------------------------------------- constrained decoding

# Bounds for the prose and span fields when a backend constrains the judge's
# output to a schema (structured output): a small judge otherwise fills its token
# budget with one field and never reaches the labels.
DECODING_LIMITS = {"prose_chars": 300, "span_chars": 200, "spans": 3}


def decoding_schema(kind: str, dimensions: DimensionSet | None = None) -> dict[str, Any]:
    """The verdict schema a backend constrains generation to (llama.cpp grammar, OpenAI/vLLM response_format).

    The same fields and types as the verdict's schema (``SCHEMAS[kind]``; a contrastive
    judge's: that of its dimension set), with the required fields first
    (backends emit properties in schema order, so the labels come before any
    prose) and bounded prose and span lists. Every object that validates here
    validates against the verdict's schema: constrained output is parsed by the same
    parser, never trusted as is.
    """
    base = contrastive_schema(dimensions) if kind == "contrastive" else SCHEMAS[kind]
    props = base["properties"]
    order = [*base["required"], *(k for k in props if k not in base["required"])]
    out: dict[str, Any] = {}
    for key in order:
        prop = dict(props[key])
        if prop.get("type") == ["string", "null"]:
            prop = {"type": "string", "maxLength": DECODING_LIMITS["prose_chars"]}
        elif prop.get("type") == "array":
            prop = {
                "type": "array",
                "items": {"type": "string", "maxLength": DECODING_LIMITS["span_chars"]},
                "maxItems": DECODING_LIMITS["spans"],
            }
        out[key] = prop
    return {
        "type": "object",
        "properties": out,
        "required": list(base["required"]),
        "additionalProperties": False,
    }
