"""The validation rules of the query-set pipeline: which personas and queries stay, and
why each other one goes.

AccessEval (section 3.2) reviewed its generated personas for generic, overlapping
or redundant entries, and its queries for neutral queries that leak disability
context and for queries too similar to each other. Here each of those is a rule
that runs the same way on every build, and on any existing set (``check``): a
candidate is removed by the first rule it fails, and the removal is a row with
that reason and its evidence. Rules that compare texts use all-MiniLM-L6-v2
(``embeddings``); their thresholds are settings of the build.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ableaudit.queryset.embeddings import near_duplicates, similarity_to
from ableaudit.queryset.lexicon import find_leaks, leakage_patterns

ANY_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
DISABILITY_PLACEHOLDER = re.compile(r"\{\s*disability\s*\}", re.IGNORECASE)

PERSONA_REASONS = ("unparseable", "empty", "generic", "leakage", "off_domain", "near_duplicate")
QUERY_REASONS = (
    "unparseable",
    "empty",
    "placeholder_in_neutral",
    "placeholder_missing",
    "placeholder_multiple",
    "placeholder_unknown",
    "leakage",
    "leakage_llm",
    "near_duplicate",
)

GENERIC_PERSONAS = frozenset(
    {
        "user",
        "users",
        "person",
        "people",
        "individual",
        "someone",
        "somebody",
        "anyone",
        "anybody",
        "everyone",
        "human",
        "general user",
        "general public",
        "public",
        "member of the public",
        "regular person",
        "average person",
        "normal person",
        "customer",
        "client",
        "visitor",
        "other",
        "others",
        "persona",
        "role",
        "short role",
        "n/a",
        "na",
        "none",
        "unknown",
        "example",
    }
)
"""Roles that say nothing about who asks: a persona must be more specific than these."""


def _norm(text: str | None) -> str:
    t = re.sub(r"[^a-z0-9/ ]+", " ", (text or "").lower())
    t = re.sub(r"^(?:a|an|the)\s+", "", re.sub(r"\s+", " ", t).strip())
    return t


def _remove(item: dict[str, Any], reason: str, detail: str) -> None:
    item.update(decision="removed", reason=reason, detail=detail)


def _kept(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [it for it in items if it.get("decision") != "removed"]


def _leak_detail(leaks: list) -> str:
    return "; ".join(f"{leak.term!r} ({leak.group})" for leak in leaks)


def validate_personas(
    items: list[dict[str, Any]],
    descriptions: dict[str, str],
    *,
    similarity: float,
    off_domain: float,
    phrases: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Decide every persona (in place, and returned): kept, or removed with its reason.

    ``items`` hold domain, persona and persona_description (and decision 'removed' already
    for answers that could not be read); ``descriptions``: each domain's description.
    Earlier items win a near-duplicate, so list the config's seed personas first.
    """
    patterns = leakage_patterns(phrases)
    for it in _kept(items):
        role = _norm(it.get("persona"))
        if not re.search(r"[a-z]", role):
            _remove(it, "empty", "no role given")
        elif role in GENERIC_PERSONAS:
            _remove(it, "generic", f"{it['persona']!r} says nothing about who asks")
        else:
            leaks = find_leaks(f"{it['persona']} {it.get('persona_description') or ''}", patterns)
            if leaks:
                _remove(it, "leakage", f"names a disability: {_leak_detail(leaks)}")
    live = _kept(items)
    texts = [_persona_text(it) for it in live]
    sims = similarity_to(texts, [descriptions[it["domain"]] for it in live])
    for it, sim in zip(live, sims, strict=True):
        if sim < off_domain:
            _remove(
                it,
                "off_domain",
                f"similarity to the domain's description {sim:.2f} < {off_domain:.2f}",
            )
    _near(_kept(items), _persona_text, similarity, by_domain=True)
    return _kept_marked(items)


def _persona_text(it: dict[str, Any]) -> str:
    desc = it.get("persona_description") or ""
    return f"{it.get('persona') or ''}: {desc}" if desc else it.get("persona") or ""


def _near(
    live: list[dict[str, Any]],
    text: Callable[[dict[str, Any]], str],
    threshold: float,
    by_domain: bool,
) -> None:
    groups = [it["domain"] for it in live] if by_domain else None
    for twin in near_duplicates([text(it) for it in live], threshold, groups):
        kept = live[twin.kept]
        _remove(
            live[twin.index],
            "near_duplicate",
            f"cosine {twin.similarity:.3f} >= {threshold:.2f} with {kept['candidate_id']} "
            f"({text(kept)!r})",
        )


def _kept_marked(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for it in items:
        if it.get("decision") != "removed":
            it.update(decision="kept", reason=None, detail=None)
    return items


def placeholder_problem(neutral: str, template: str) -> tuple[str, str] | None:
    """(reason, detail) when the neutral query holds a placeholder or the template does not
    hold exactly one ``{disability}``; None when both are right."""
    if ANY_PLACEHOLDER.search(neutral):
        return (
            "placeholder_in_neutral",
            f"the neutral query holds {ANY_PLACEHOLDER.findall(neutral)}",
        )
    found = ANY_PLACEHOLDER.findall(template)
    if not found:
        return "placeholder_missing", "the template has no {disability} placeholder"
    if len(found) > 1:
        return "placeholder_multiple", f"the template has {len(found)} placeholders: {found}"
    if not DISABILITY_PLACEHOLDER.fullmatch(found[0]):
        return (
            "placeholder_unknown",
            f"the template's placeholder is {found[0]}, not {{disability}}",
        )
    return None


def validate_queries(
    items: list[dict[str, Any]],
    *,
    similarity: float,
    phrases: Sequence[str] = (),
    llm_leaks: dict[str, tuple[bool | None, str]] | None = None,
) -> list[dict[str, Any]]:
    """Decide every query candidate (in place, and returned). ``items`` hold candidate_id,
    domain, neutral_query and disability_template (None where the set has no template);
    ``llm_leaks``: the optional LLM check's verdict per candidate id."""
    patterns = leakage_patterns(phrases)
    for it in _kept(items):
        neutral = (it.get("neutral_query") or "").strip()
        template = it.get("disability_template")
        if not neutral or (template is not None and not template.strip()):
            _remove(it, "empty", "no neutral query" if not neutral else "no template")
            continue
        problem = placeholder_problem(neutral, template) if template is not None else None
        if problem is not None:
            _remove(it, *problem)
            continue
        leaks = find_leaks(neutral, patterns)
        if leaks:
            _remove(it, "leakage", f"the neutral query says {_leak_detail(leaks)}")
            continue
        verdict, why = (llm_leaks or {}).get(it["candidate_id"], (None, ""))
        if verdict:
            _remove(it, "leakage_llm", f"the checker says it leaks: {why}" if why else "")
    _near(_kept(items), lambda it: it["neutral_query"], similarity, by_domain=False)
    for it in _kept(items):
        if it.get("disability_template"):
            it["disability_template"] = DISABILITY_PLACEHOLDER.sub(
                "{disability}", it["disability_template"]
            )
    return _kept_marked(items)
