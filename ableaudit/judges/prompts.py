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

from ableaudit.keys import canonical_json, sha256_hex

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"

# The version each prompt is used at now.
CURRENT = {
    "rubric_neutral": "v1",
    "rubric_disability": "v1",
    "contrastive": "v1",
}

# sha256 of every released prompt file; a released prompt never changes.
PINNED_SHA256 = {
    "rubric_neutral.v1": "336853b55d155760239d4735ab576af2304271bbfffbe56d0803978ca489507f",
    "rubric_disability.v1": "a82c58131bbaa8b3ff67e9305ce4832bc3d6b9c8f5acc7577f8df66ec8dc29c5",
    "contrastive.v1": "05b9da115af67d3cfa162cbf956700a634bf905fbbd08473b9b3ec1829b8b687",
}

PLACEHOLDERS = {
    "rubric_neutral": ("nonce", "query", "response"),
    "rubric_disability": ("nonce", "query", "response", "disability"),
    "contrastive": ("nonce", "question_a", "response_a", "question_b", "response_b"),
}

NONCE_HEX = 12
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class PromptError(ValueError):
    """A prompt file is missing, malformed or changed after release."""


@dataclass(frozen=True)
class PromptTemplate:
    name: str  # 'rubric_neutral' | 'rubric_disability' | 'contrastive'
    version: str  # 'v1'
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
    question_a: str, response_a: str, question_b: str, response_b: str, version: str | None = None
) -> tuple[PromptTemplate, str, tuple[dict, ...]]:
    """The contrastive prompt for one (neutral, disability) pair of responses."""
    tpl = load_prompt("contrastive", version)
    texts = {
        "question_a": question_a,
        "response_a": response_a,
        "question_b": question_b,
        "response_b": response_b,
    }
    nonce = fence_nonce(texts)
    return tpl, nonce, tpl.render({**texts, "nonce": nonce})
