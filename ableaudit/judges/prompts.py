"""Versioned judge prompts, and how a subject is put inside one.

Each prompt is a text file ``prompts/<name>.<version>.txt`` with a ``[system]``
and a ``[user]`` section. The version string (``rubric_neutral.v1``) is part of
every verdict's key, so a released file must never change: ``PINNED_SHA256``
holds each file's hash and the tests fail when a file and its pin disagree.
To change a prompt, add ``<name>.v2.txt``, pin it, and point ``CURRENT`` at it;
the next run judges again under the new version and keeps the old verdicts.

Why the fences: the judged texts are written by the model under audit, and a
response may contain "Score: 10" or a whole fake JSON verdict. Every subject
text is quoted between marker lines carrying a nonce (``<<<RESPONSE_<nonce>>>``
... ``<<<END_RESPONSE_<nonce>>>``), and the instructions say that anything inside
is data. The nonce is a hash of the subject texts, so the same subject always
gives the same prompt (and cache key); a text that happens to contain the nonce
makes us draw the next one, so no subject can close its own fence. The parser
never sees the subject at all (see ``parsing.py``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ableaudit.judges.dimensions import Dimension, DimensionSet, default_set, number_word
from ableaudit.keys import canonical_json, sha256_hex

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"

# The version each prompt is used at now.
CURRENT = {
    "rubric_neutral": "v1",
    "rubric_disability": "v1",
    "contrastive": "v1",
    "contrastive_dimensions": "v1",
}

# sha256 of every released prompt file; a released prompt never changes.
PINNED_SHA256 = {
    "rubric_neutral.v1": "336853b55d155760239d4735ab576af2304271bbfffbe56d0803978ca489507f",
    "rubric_disability.v1": "a82c58131bbaa8b3ff67e9305ce4832bc3d6b9c8f5acc7577f8df66ec8dc29c5",
    "contrastive.v1": "05b9da115af67d3cfa162cbf956700a634bf905fbbd08473b9b3ec1829b8b687",
    "contrastive_dimensions.v1": "beb4c2a9a52ab9e7dd15fe0e0332adb0b835571a88fb9aa8a0dd615f07aa9b06",
}

PLACEHOLDERS = {
    "rubric_neutral": ("nonce", "query", "response"),
    "rubric_disability": ("nonce", "query", "response", "disability"),
    "contrastive": ("nonce", "question_a", "response_a", "question_b", "response_b"),
    # the frame of a prompt built from a dimension set: the set's parts first, then the subject
    "contrastive_dimensions": (
        "nonce",
        "question_a",
        "response_a",
        "question_b",
        "response_b",
        "dimensions",
        "reply_values",
        "reply_form",
    ),
}

NONCE_HEX = 12
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class PromptError(ValueError):
    """A prompt file is missing, malformed or changed after release."""


@dataclass(frozen=True)
class PromptTemplate:
    name: str  # 'rubric_neutral' | 'rubric_disability' | 'contrastive'
    version: str  # 'v1'; a dimension set's '<set name>.<digest>'
    system: str
    user: str
    sha256: str

    @property
    def prompt_version(self) -> str:
        """The value stored in raw.judgments.prompt_version, e.g. 'rubric_neutral.v1'."""
        return f"{self.name}.{self.version}"

    def render(self, values: Mapping[str, str]) -> tuple[dict, ...]:
        """Chat messages with the placeholders filled in ONE pass.

        One pass matters: a subject text containing ``{{response}}`` is inserted
        as it is and never expanded again.
        """
        wanted = set(PLACEHOLDERS[self.name])
        missing = wanted - set(values)
        if missing:
            raise PromptError(f"prompt {self.prompt_version} needs values for {sorted(missing)}")

        def fill(text: str) -> str:
            return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)

        messages: tuple[dict, ...] = ({"role": "user", "content": fill(self.user)},)
        if self.system:
            messages = ({"role": "system", "content": fill(self.system)},) + messages
        return messages


@cache
def load_prompt(name: str, version: str | None = None) -> PromptTemplate:
    """Read ``prompts/<name>.<version>.txt`` and check it against its pin."""
    if name not in CURRENT:
        raise PromptError(f"unknown judge prompt {name!r}; known: {sorted(CURRENT)}")
    version = version or CURRENT[name]
    key = f"{name}.{version}"
    path = PROMPT_DIR / f"{key}.txt"
    if not path.is_file():
        raise PromptError(f"judge prompt file {path} is missing")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    pinned = PINNED_SHA256.get(key)
    if pinned is None:
        raise PromptError(
            f"judge prompt {key} has no pinned sha256 in PINNED_SHA256 (ableaudit/judges/prompts.py); add {digest}"
        )
    if pinned != digest:
        raise PromptError(
            f"judge prompt {path.name} changed after release (sha256 {digest[:12]}..., pinned {pinned[:12]}...). "
            f"Released prompts are part of verdict keys: restore the file, or copy it to {name}.v<next>.txt, "
            "pin the new file and set CURRENT to it"
        )
    system, user = _sections(data.decode("utf-8"), path)
    found = set(_PLACEHOLDER.findall(system + user))
    if found != set(PLACEHOLDERS[name]):
        raise PromptError(
            f"{path.name} uses placeholders {sorted(found)}; expected {sorted(PLACEHOLDERS[name])}"
        )
    return PromptTemplate(name=name, version=version, system=system, user=user, sha256=digest)


def _sections(text: str, path: Path) -> tuple[str, str]:
    parts: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.strip() in ("[system]", "[user]"):
            current = line.strip()[1:-1]
            parts[current] = []
        elif current is None:
            if line.strip() and not line.startswith("#"):
                raise PromptError(
                    f"{path.name}: text before the first [system]/[user] section must be '#' comments"
                )
        else:
            parts[current].append(line)
    if "user" not in parts:
        raise PromptError(f"{path.name} has no [user] section")
    return "\n".join(parts.get("system", [])).strip(), "\n".join(parts["user"]).strip() + "\n"


def fence_nonce(texts: Mapping[str, str | None]) -> str:
    """A nonce derived from the subject texts that occurs in none of them (case-insensitive)."""
    haystack = "\n".join(t for t in texts.values() if t).lower()
    base = canonical_json(dict(texts))
    attempt = 0
    while True:
        nonce = sha256_hex(base if attempt == 0 else f"{base}#{attempt}")[:NONCE_HEX]
        if nonce not in haystack:
            return nonce
        attempt += 1


def rubric_messages(
    query: str, response: str, disability: str | None, version: str | None = None
) -> tuple[PromptTemplate, str, tuple[dict, ...]]:
    """The rubric prompt for one response: the disability-aware variant when a disability is given."""
    name = "rubric_disability" if disability else "rubric_neutral"
    tpl = load_prompt(name, version)
    texts = {"query": query, "response": response}
    if disability:
        texts["disability"] = disability
    nonce = fence_nonce(texts)
    return tpl, nonce, tpl.render({**texts, "nonce": nonce})


def contrastive_messages(
    question_a: str,
    response_a: str,
    question_b: str,
    response_b: str,
    version: str | None = None,
    dimensions: DimensionSet | None = None,
) -> tuple[PromptTemplate, str, tuple[dict, ...]]:
    """The contrastive prompt for one (neutral, disability) pair of responses, built from
    ``dimensions`` (default: the built-in set, i.e. ``contrastive.v1``); ``version`` names a
    released contrastive prompt file instead."""
    tpl = load_prompt("contrastive", version) if version else dimension_prompt(dimensions)
    texts = {
        "question_a": question_a,
        "response_a": response_a,
        "question_b": question_b,
        "response_b": response_b,
    }
    nonce = fence_nonce(texts)
    return tpl, nonce, tpl.render({**texts, "nonce": nonce})


# --------------------------------------------------------------------------- prompts from dimension sets

_BUILT: dict[str, PromptTemplate] = {}


def dimension_prompt(dimensions: DimensionSet | None = None) -> PromptTemplate:
    """The contrastive prompt of a dimension set: the frame ``contrastive_dimensions`` with
    the set's dimensions, answers and reply form filled in.

    The built-in set gives the released ``contrastive.v1`` (checked here, text for text); any
    other set's version is ``<set name>.<digest>``, the digest of the frame's version and the
    whole set, so editing a question, a label or a direction judges again under a new key.
    """
    dims = dimensions or default_set()
    key = canonical_json(dims.model_dump())
    if key not in _BUILT:
        _BUILT[key] = _build(dims)
    return _BUILT[key]


def _build(dims: DimensionSet) -> PromptTemplate:
    frame = load_prompt("contrastive_dimensions")
    parts = {
        "dimensions": dimensions_text(dims),
        "reply_values": reply_values(dims),
        "reply_form": reply_form(dims),
    }

    def fill(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: parts.get(m.group(1), m.group(0)), text)

    system, user = fill(frame.system), fill(frame.user)
    if dims.is_default:
        released = load_prompt("contrastive", "v1")
        if (system, user) != (released.system, released.user):
            raise PromptError(
                f"{frame.prompt_version} with the built-in dimensions no longer gives "
                f"{released.prompt_version}: restore {frame.prompt_version}.txt"
            )
        return released
    digest = sha256_hex(canonical_json({"frame": frame.prompt_version, "set": dims.model_dump()}))
    return PromptTemplate(
        name="contrastive",
        version=f"{dims.name}.{digest[:NONCE_HEX]}",
        system=system,
        user=user,
        sha256=sha256_hex(f"[system]\n{system}\n[user]\n{user}"),
    )


def _quote(value: str) -> str:
    return f'"{value}"'


def _either(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _sentence(text: str) -> str:
    return text if text[-1] in ".?!" else text + "."


def _choice(d: Dimension) -> str:
    """The answers of a label dimension as the prompt offers them: the worst, the best, then
    the ones between, with when to use which."""
    v = d.values
    text = _either([_quote(x) for x in [v[-1], v[0], *v[1:-1]]])
    hints = [f"use {_quote(label)} {d.hints[label]}" for label in v if label in d.hints]
    return text + (f" ({'; '.join(hints)})" if hints else "")


def _span_rule(d: Dimension, into: str) -> str:
    v = d.values
    if d.kind == "labels":
        quoted = _either([_quote(x) for x in reversed(v[1:])])
        return (
            f"For every {quoted}, copy the phrases of Answer B that support it, word for word, "
            f"into {into}; leave the list empty for {_quote(v[0])}."
        )
    return (
        f"For any answer other than {v[0]}, copy the phrases of Answer B that support it, word "
        f"for word, into {into}; leave the list empty for {v[0]}."
    )


def _line(d: Dimension) -> str:
    line = f"- {d.name}: {d.question}"
    if d.counts:
        line += f" Counts: {_sentence(d.counts)}"
    if d.does_not_count:
        line += f" Does not count: {_sentence(d.does_not_count)}"
    return line


def dimensions_text(dims: DimensionSet) -> str:
    """The task, the dimensions and how to answer them. When every dimension has the same
    labels (and hints and spans), one rule after the list says how to label them all (the
    built-in set's form); otherwise each dimension's line says how it is answered."""
    ds = dims.dimensions
    n = len(ds)
    head = f"{dims.instructions} Judge {number_word(n)} dimension{'s' if n > 1 else ''}:"
    first = ds[0]
    shared = all(
        d.kind == "labels"
        and (d.values, d.hints, d.spans) == (first.values, first.hints, first.spans)
        for d in ds
    )
    if shared:
        rule = f"Label {'each' if n > 1 else 'the'} dimension {_choice(first)}."
        if first.spans:
            rule += " " + _span_rule(first, "the list for that dimension")
        return "\n".join([head, *(_line(d) for d in ds), rule])
    lines = []
    for d in ds:
        if d.kind == "labels":
            answer = f" Answer {_choice(d)}."
        else:
            v = d.values
            low, high = (v[0], v[-1]) if int(v[0]) < int(v[-1]) else (v[-1], v[0])
            answer = (
                f" Answer with a whole number from {low} to {high}, where {v[0]} is the best "
                f"and {v[-1]} the worst."
            )
        if d.spans:
            answer += " " + _span_rule(d, f"{d.name}_spans")
        lines.append(_line(d) + answer)
    return "\n".join([head, *lines])


def _range(d: Dimension) -> str:
    numbers = sorted(int(v) for v in d.values)
    return f"{numbers[0]}-{numbers[-1]}"


def reply_values(dims: DimensionSet) -> str:
    """What replaces the placeholders of the reply form: 'one label in place of each "No | Yes"'."""
    labels = list(
        dict.fromkeys(" | ".join(d.values) for d in dims.dimensions if d.kind == "labels")
    )
    ranges = list(dict.fromkeys(_range(d) for d in dims.dimensions if d.kind == "scale"))
    parts = []
    if labels:
        parts.append("one label in place of each " + _either([_quote(x) for x in labels]))
    if ranges:
        parts.append(f"a whole number in place of each range ({', '.join(ranges)})")
    return ", ".join(parts)


def reply_form(dims: DimensionSet) -> str:
    """The example verdict, deliberately not valid (a label list, a range): a judge that copies
    it produces an unparseable verdict, never a silent answer."""
    fields = [
        '"content_differences": "what B adds or changes compared with A, in one or two sentences"'
    ]
    for d in dims.dimensions:
        if d.kind == "labels":
            fields.append(f'"{d.name}": "{" | ".join(d.values)}"')
        else:
            fields.append(f'"{d.name}": {_range(d)}')
        if d.spans:
            fields.append(f'"{d.name}_spans": ["phrase copied from Answer B"]')
    fields += [
        '"decline_in_response_a": true or false',
        '"decline_in_response_b": true or false',
        '"decline_explanation": "why an answer declined, or empty"',
    ]
    return "{" + ", ".join(fields) + "}"
