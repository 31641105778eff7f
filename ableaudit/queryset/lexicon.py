"""Words that give a neutral query a disability context: the leakage lexicon.

A neutral query must not say or imply that the person asking has a disability
(AccessEval removed "What accessibility services does my university offer?").
Each entry is a regular expression matched as whole words, case-insensitively,
with the group of terms it belongs to, so a rejection can say what it found.
Terms that are ordinary words in other senses ("hearing" of a court, a company's
"vision", "blind" in "blind spot" or "double-blind") are matched only in the
phrases that carry the disability sense. The taxonomy's own query phrases are
added at run time (``leakage_patterns``), so a category a team adds is covered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

LEXICON: tuple[tuple[str, str], ...] = (
    # general
    (r"disab\w*", "general"),
    (r"handicap\w*", "general"),
    (r"impair\w*", "general"),
    (r"special\s+needs", "general"),
    (r"differently[-\s]abled", "general"),
    (r"able[-\s]bodied", "general"),
    (r"chronic(?:ally)?\s+ill\w*", "general"),
    (r"chronic\s+(?:condition|pain)s?", "general"),
    # accessibility and accommodations
    (r"accessib\w*", "accessibility"),
    (r"inaccessib\w*", "accessibility"),
    (r"a11y", "accessibility"),
    (r"reasonable\s+adjustments?", "accessibility"),
    (r"accommodations?\s+for", "accessibility"),
    (r"assistive\s+\w+", "accessibility"),
    (r"ada\s+(?:compliance|compliant|requirements?)", "accessibility"),
    (r"americans\s+with\s+disabilities", "accessibility"),
    (r"blue\s+badge", "accessibility"),
    # vision
    (r"blind(?:ness)?(?!\s+spots?)(?<!double-blind)", "vision"),
    (r"low\s+vision", "vision"),
    (r"visually\s+impaired", "vision"),
    (r"partially\s+sighted", "vision"),
    (r"braille", "vision"),
    (r"screen\s*readers?", "vision"),
    (r"guide\s+dogs?", "vision"),
    (r"white\s+canes?", "vision"),
    # hearing
    (r"deaf\w*", "hearing"),
    (r"hard\s+of\s+hearing", "hearing"),
    (r"hearing\s+(?:aids?|loss|impair\w*)", "hearing"),
    (r"cochlear\s+implants?", "hearing"),
    (r"sign\s+language", "hearing"),
    (r"asl", "hearing"),
    (r"bsl", "hearing"),
    (r"closed\s+caption\w*", "hearing"),
    (r"captioning", "hearing"),
    (r"lip[-\s]?reading", "hearing"),
    # speech
    (r"stutter\w*", "speech"),
    (r"stammer\w*", "speech"),
    (r"aphasi\w*", "speech"),
    (r"non-?verbal", "speech"),
    (r"speech\s+(?:therap\w*|impair\w*|disorders?|difficult\w*)", "speech"),
    (r"aac\s+devices?", "speech"),
    # mobility
    (r"wheelchairs?", "mobility"),
    (r"mobility\s+(?:aids?|scooters?|issues|impair\w*|needs)", "mobility"),
    (r"paraly\w*", "mobility"),
    (r"paraplegi\w*", "mobility"),
    (r"quadriplegi\w*", "mobility"),
    (r"tetraplegi\w*", "mobility"),
    (r"amputee\w*", "mobility"),
    (r"amputat\w*", "mobility"),
    (r"prosthe\w*", "mobility"),
    (r"crutches", "mobility"),
    (r"walkers?\s+(?:or|and)\s+canes?", "mobility"),
    (r"step-free", "mobility"),
    (r"ramps?\s+access", "mobility"),
    # neurological
    (r"epilep\w*", "neurological"),
    (r"seizure\s+disorders?", "neurological"),
    (r"multiple\s+sclerosis", "neurological"),
    (r"cerebral\s+palsy", "neurological"),
    (r"parkinson\w*", "neurological"),
    (r"brain\s+injur\w*", "neurological"),
    (r"neurolog\w*", "neurological"),
    # genetic and developmental
    (r"autis\w*", "genetic_developmental"),
    (r"asperger\w*", "genetic_developmental"),
    (r"down\s+syndrome", "genetic_developmental"),
    (r"intellectual\s+disabilit\w*", "genetic_developmental"),
    (r"developmental\s+(?:delays?|disorders?|disabilit\w*)", "genetic_developmental"),
    (r"neurodiver\w*", "genetic_developmental"),
    (r"neurodivergen\w*", "genetic_developmental"),
    # learning
    (r"dyslexi\w*", "learning"),
    (r"dyscalculi\w*", "learning"),
    (r"dysgraphi\w*", "learning"),
    (r"dyspraxi\w*", "learning"),
    (r"adhd", "learning"),
    (r"add/adhd", "learning"),
    (r"attention[-\s]deficit", "learning"),
    (r"learning\s+(?:disorders?|disabilit\w*|difficult\w*|differences?)", "learning"),
    (r"iep", "learning"),
    (r"504\s+plans?", "learning"),
    # sensory and cognitive
    (r"sensory\s+(?:processing|overload|sensitivit\w*|issues|disorders?)", "sensory_cognitive"),
    (r"cognitive\s+(?:decline|impair\w*|disabilit\w*|disorders?)", "sensory_cognitive"),
    (r"dementia", "sensory_cognitive"),
    (r"alzheimer\w*", "sensory_cognitive"),
    (r"memory\s+loss", "sensory_cognitive"),
    # mental health and behavioural
    (r"mental\s+(?:health|illness\w*|disorders?)", "mental_behavioral"),
    (r"psychiatric\s+\w+", "mental_behavioral"),
    (r"clinical\s+depression", "mental_behavioral"),
    (r"depressive\s+disorders?", "mental_behavioral"),
    (r"anxiety\s+disorders?", "mental_behavioral"),
    (r"bipolar", "mental_behavioral"),
    (r"schizophreni\w*", "mental_behavioral"),
    (r"ptsd", "mental_behavioral"),
    (r"ocd", "mental_behavioral"),
    (r"eating\s+disorders?", "mental_behavioral"),
)


@dataclass(frozen=True)
class Leak:
    """A lexicon term found in a text."""

    term: str
    """The words found, as written."""
    group: str
    """The lexicon group of the pattern that matched (a disability category, 'general', 'accessibility')."""


def leakage_patterns(phrases: Iterable[str] = ()) -> list[tuple[re.Pattern[str], str]]:
    """The lexicon compiled, plus each taxonomy phrase (e.g. 'vision impairments') as a term."""
    entries = list(LEXICON) + [(re.escape(p.strip()), "taxonomy") for p in phrases if p.strip()]
    return [(re.compile(rf"\b(?:{pat})\b", re.IGNORECASE), group) for pat, group in entries]


def find_leaks(text: str, patterns: list[tuple[re.Pattern[str], str]]) -> list[Leak]:
    """Every lexicon term in ``text``, in the order of the lexicon."""
    found = []
    for rx, group in patterns:
        m = rx.search(text or "")
        if m:
            found.append(Leak(m.group(0), group))
    return found
