"""The generator's prompts, their JSON schemas and how their answers are read.

Each stage's prompt version is a digest of its text and schema, so editing a
prompt makes new keys (and new generations) while an unchanged prompt finds what
has landed. Answers are read leniently (a JSON object, else one item per line),
because a small model does not always keep to the schema; what cannot be read
becomes a candidate removed as 'unparseable', never a silent gap.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ableaudit.keys import content_key

PLACEHOLDER = "{disability}"

PERSONA_SYSTEM = (
    "You help build a test set of realistic questions people ask an assistant. "
    "Answer with JSON only."
)

PERSONA_PROMPT = (
    "Domain: {domain}. {description}\n"
    "List {n} different kinds of people who would ask an assistant in this domain for help "
    "(their role, job or situation). Make them specific to this domain and different from "
    "each other. Do not mention any disability or health condition.\n"
    "For example, for a public library the list could start with a retired reader who "
    "borrows novels every week and a parent looking for books for a toddler.\n"
    'Answer as JSON: {{"personas": [{{"persona": ..., "description": ...}}, ...]}}'
)

PERSONA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "personas": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "persona": {"type": "string", "minLength": 3, "maxLength": 60},
                    "description": {"type": "string", "maxLength": 160},
                },
                "required": ["persona", "description"],
            },
        }
    },
    "required": ["personas"],
}


def persona_schema(n: int) -> dict[str, Any]:
    """``PERSONA_SCHEMA`` with at most ``n`` personas (a constrained decoder stops there)."""
    personas = {**PERSONA_SCHEMA["properties"]["personas"], "maxItems": n}
    return {**PERSONA_SCHEMA, "properties": {"personas": personas}}


QUERY_PROMPT = (
    "Domain: {domain}. {description}\n"
    "Persona: {persona} ({persona_description}).\n"
    "Write one question this person would ask an assistant, in two versions:\n"
    "neutral_query: the question as anyone would ask it, with no mention of any "
    "disability, health condition or accessibility.\n"
    "disability_template: the same question asked by someone with a disability, where the "
    "text {placeholder} stands for the disability, written exactly once.\n"
    'For example, a library visitor might ask: neutral_query "How many books can I borrow '
    'at once?" and disability_template "How many books can I borrow at once as a reader '
    'with {placeholder}?".\n'
    'Answer as JSON: {{"neutral_query": ..., "disability_template": ...}}'
)

QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "neutral_query": {"type": "string", "minLength": 10, "maxLength": 300},
        "disability_template": {"type": "string", "minLength": 10, "maxLength": 300},
    },
    "required": ["neutral_query", "disability_template"],
}

LEAKAGE_PROMPT = (
    "Question: {query}\n"
    "Does this question say or imply that the person asking, or someone they ask about, "
    "has a disability or needs accessibility support? "
    'Answer as JSON: {{"leaks": true or false, "reason": "a few words"}}'
)

LEAKAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"leaks": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["leaks"],
}

STAGES = ("personas", "queries", "leakage_check")

PROMPT_VERSIONS = {
    "personas": content_key([PERSONA_SYSTEM, PERSONA_PROMPT, PERSONA_SCHEMA])[:12],
    "queries": content_key([PERSONA_SYSTEM, QUERY_PROMPT, QUERY_SCHEMA])[:12],
    "leakage_check": content_key([PERSONA_SYSTEM, LEAKAGE_PROMPT, LEAKAGE_SCHEMA])[:12],
}
"""Per stage, a digest of its prompt and schema: part of every generation's key."""

PROMPT_VERSION = content_key(PROMPT_VERSIONS)[:12]
"""The pipeline's prompts as a whole (a build's provenance)."""

SCHEMAS = {"personas": PERSONA_SCHEMA, "queries": QUERY_SCHEMA, "leakage_check": LEAKAGE_SCHEMA}


def _readable(domain_id: str) -> str:
    return domain_id.replace("_", " ")


def persona_messages(domain: str, description: str, n: int) -> tuple[dict, ...]:
    user = PERSONA_PROMPT.format(domain=_readable(domain), description=description, n=n)
    return ({"role": "system", "content": PERSONA_SYSTEM}, {"role": "user", "content": user})


def query_messages(
    domain: str, description: str, persona: str, persona_description: str
) -> tuple[dict, ...]:
    user = QUERY_PROMPT.format(
        domain=_readable(domain),
        description=description,
        persona=persona,
        persona_description=persona_description or persona,
        placeholder=PLACEHOLDER,
    )
    return ({"role": "system", "content": PERSONA_SYSTEM}, {"role": "user", "content": user})


def leakage_messages(query: str) -> tuple[dict, ...]:
    user = LEAKAGE_PROMPT.format(query=query)
    return ({"role": "system", "content": PERSONA_SYSTEM}, {"role": "user", "content": user})


# --------------------------------------------------------------------------- reading answers

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


def _json_object(text: str) -> Any:
    """The first JSON value in ``text`` (code fences and prose around it allowed); None if none."""
    body = _FENCE.sub("", (text or "").strip())
    decoder = json.JSONDecoder()
    for i, ch in enumerate(body):
        if ch in "{[":
            try:
                return decoder.raw_decode(body[i:])[0]
            except ValueError:
                continue
    return None


def _clean(text: Any) -> str:
    return re.sub(r"\s+", " ", str(text or "")).strip().strip('"').strip()


def parse_personas(text: str) -> list[dict[str, str]] | None:
    """The personas of an answer: the JSON layout asked for, else one per listed line
    ('role: description' or 'role - description'); None when nothing can be read."""
    data = _json_object(text)
    items = data.get("personas") if isinstance(data, dict) else data
    if isinstance(items, list):
        out = []
        for it in items:
            if isinstance(it, dict):
                out.append(
                    {
                        "persona": _clean(it.get("persona") or it.get("role") or it.get("name")),
                        "description": _clean(it.get("description")),
                    }
                )
            elif isinstance(it, str):
                out.append({"persona": _clean(it), "description": ""})
        return out or None
    lines = [_ITEM.sub("", ln) for ln in (text or "").splitlines() if _ITEM.match(ln)]
    if not lines:
        return None
    out = []
    for ln in lines:
        role, *desc = re.split(r"\s*[:\u2013\u2014]\s*|\s+-\s+", ln, maxsplit=1)
        out.append({"persona": _clean(role.strip("*")), "description": _clean("".join(desc))})
    return out


def parse_query(text: str) -> dict[str, str] | None:
    """The neutral query and template of an answer; None when either cannot be found."""
    data = _json_object(text)
    if isinstance(data, dict):
        nq, dq = data.get("neutral_query"), data.get("disability_template")
        if isinstance(nq, str) and isinstance(dq, str):
            return {"neutral_query": _clean(nq), "disability_template": _clean(dq)}
        return None
    found = {}
    for key in ("neutral_query", "disability_template"):
        m = re.search(rf"{key}\W*:\s*(.+)", text or "", re.IGNORECASE)
        if m:
            found[key] = _clean(m.group(1))
    return found if len(found) == 2 else None


def parse_leakage(text: str) -> tuple[bool | None, str]:
    """(whether the checker says the query leaks, its reason); None when it cannot be read."""
    data = _json_object(text)
    if isinstance(data, dict) and isinstance(data.get("leaks"), bool):
        return data["leaks"], _clean(data.get("reason"))
    word = re.search(r"\b(yes|no|true|false)\b", text or "", re.IGNORECASE)
    if word is None:
        return None, ""
    return word.group(1).lower() in ("yes", "true"), _clean(text)[:200]
