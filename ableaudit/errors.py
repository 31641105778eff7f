"""Errors a user can fix, and the "did you mean" that names the likely fix.

Every such error derives from ``AbleauditError``: the command line prints its
message alone (no traceback unless ``--debug``) and exits with its
``exit_code``. The message names the file, key or field and the fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar


class AbleauditError(Exception):
    """An error the user can fix; its message says what is wrong and how to fix it."""

    exit_code: ClassVar[int] = 2
    """The command line's exit status for it (2: a usage or config error)."""

    def __init__(self, *args: object) -> None:
        # a message may quote what a server answered, and a server may echo the key it was sent
        from ableaudit.redaction import redact

        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class UsageError(AbleauditError):
    """The command line was given a combination of flags that cannot work."""


def close_matches(value: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The choices closest to ``value`` (case and ``-``/``_``/space differences ignored), best first."""

    def norm(text: str) -> str:
        return " ".join(text.lower().replace("_", " ").replace("-", " ").split())

    by_norm: dict[str, str] = {}
    for choice in choices:
        by_norm.setdefault(norm(choice), choice)
    hits = difflib.get_close_matches(norm(value), list(by_norm), n=n, cutoff=0.7)
    return [by_norm[h] for h in hits]


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest choice, or ``""`` when none is close."""
    hits = close_matches(value, choices, n=1)
    return f"; did you mean {hits[0]!r}?" if hits else ""


class InputFileError(AbleauditError, FileNotFoundError):
    """A file the command was given does not exist."""


def require_file(path: str | Path, what: str = "input file") -> Path:
    """``path`` when it is a file; else InputFileError naming it, before any slow step starts."""
    p = Path(path).expanduser()
    if not p.is_file():
        why = "is a folder, not a file" if p.is_dir() else "does not exist"
        raise InputFileError(f"{what} {path} {why}; check the path")
    return p
