"""Masking: a response's disability words replaced by a neutral token before a scorer reads it.

A lexicon or classifier scorer reacts to the words of the prompt that an answer echoes:
VADER's lexicon gives "blind" and "disorder" -1.7 and "depression" -2.7, so an answer that
says "for a blind person" where the neutral answer says "for you" scores worse for the
word alone. A masked scorer (``vader_masked``, ``regard_masked``) scores the text with
every term of the pair's mask set replaced by ``NEUTRAL_TOKEN``, in both answers of the
pair, so the shift it measures is the model's, not the lexicon's.

The mask set of a disability category is its ``query_phrase`` (seeds/disabilities.csv)
and its terms in seeds/disability_terms.csv (each term and its plural); model
``int_mask_sets`` gathers them and hashes them into ``mask_digest``.

How a term matches (``mask_text``):

- case-insensitively, between word boundaries: "blind" masks "Blind" and "BLIND" but not
  "blindness" or "blinds" (list those as terms of their own, or as a plural);
- a space or hyphen in a term matches any run of spaces and hyphens: "low vision" masks
  "low-vision" and "low  vision"; an apostrophe matches ' and ’;
- longest first: where terms overlap, the longest one that matches at the earliest
  position wins, so "a blind person" becomes one token, never "a blind someone";
- an article right before a term goes with it ("a", "an", "the"): "for a blind person"
  becomes "for someone", not "for a someone".

The token is "someone": VADER's lexicon does not hold it and it is neither a booster nor a
negation, so it adds 0 to a sentence's valence; it names a person and nothing about them,
so a regard classifier still reads a sentence about a person, with no demographic in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

NEUTRAL_TOKEN = "someone"
"""What every occurrence of a term becomes."""

MASKING_VERSION = f"mask-1:{NEUTRAL_TOKEN}"
"""Part of every masked scorer's version: bump the number when the matching rule changes
(a change of token changes it too), so every masked text is scored again once."""

_WORD = r"[a-z0-9]+(?:'[a-z0-9]+)*"
_TERM = re.compile(rf"{_WORD}(?:[ -]{_WORD})*")
# a term starts after a character that is neither a letter, a digit nor a hyphen, and ends
# before one (an apostrophe may follow: "a blind person's cane" masks "a blind person")
_START, _END = r"(?<![\w-])", r"(?![\w-])"
_ARTICLE = rf"(?:{_START}(?:an?|the)\s+)?"


class MaskTermError(ValueError):
    """A term that cannot be matched as written; the message names it and the rule."""


def _term_pattern(term: str) -> str:
    term = term.replace("’", "'")
    if not _TERM.fullmatch(term):
        raise MaskTermError(
            f"mask term {term!r}: write it in lowercase letters and digits, words separated by "
            "a single space or hyphen, an apostrophe only inside a word (seeds/disability_terms.csv)"
        )
    return r"[\s-]+".join(re.escape(w).replace("'", "['’]") for w in re.split(r"[ -]", term))


@lru_cache(maxsize=1024)
def _pattern(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    unique = sorted(
        {t.strip().lower() for t in terms if t and t.strip()}, key=lambda t: (-len(t), t)
    )
    if not unique:
        return None
    alternatives = "|".join(_term_pattern(t) for t in unique)
    return re.compile(rf"{_ARTICLE}{_START}(?:{alternatives}){_END}", re.IGNORECASE)


def mask_text(text: str | None, terms: Iterable[str]) -> str | None:
    """``text`` with every occurrence of ``terms`` replaced by ``NEUTRAL_TOKEN``; None stays None."""
    if text is None:
        return None
    pattern = _pattern(tuple(terms))
    return text if pattern is None else pattern.sub(_token, text)


def _token(match: re.Match[str]) -> str:
    # a sentence that began with the term begins with the token
    return NEUTRAL_TOKEN.capitalize() if match.group(0)[:1].isupper() else NEUTRAL_TOKEN


def mask_texts(
    texts: Sequence[str | None], term_lists: Sequence[Sequence[str] | None]
) -> list[str | None]:
    """Each text masked with its own terms (a null list masks nothing)."""
    return [mask_text(t, terms or ()) for t, terms in zip(texts, term_lists, strict=True)]
