"""Keys out of every text that lands or is logged.

A server may echo the key it was sent (``401 Incorrect API key provided: sk-...``), a client
library may put a URL with its credentials into an error. Every text that reaches a file passes
``redact``: the error messages and judge outputs the landing layer writes, the run records, the
log lines (``install_log_redaction``) and the Prefect artifacts. It replaces with ``MARKER``

- the value of every key the process can see: the environment variables named by a target's
  ``api_key_env`` (``remember_env``), every variable whose name says it holds a key
  (``OPENAI_API_KEY``, ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``), and the
  credentials of every URL the run was given (``remember_url``);
- each such value in the forms it travels in: URL-encoded, base64 alone, and base64 of
  ``user:key`` as HTTP Basic auth sends the credentials of a URL;
- key-shaped tokens whatever their value: ``sk-...``, ``Bearer ...``, ``Basic ...``, and the
  ``user:key@`` of a URL.

Values shorter than ``MIN_SECRET_CHARS`` are not searched for by value (a key of three letters
would redact every word holding them); their Basic-auth form and the shapes above still are.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
from collections.abc import Callable
from urllib.parse import quote, quote_plus, unquote

from ableaudit.keys import strip_url_credentials

MARKER = "[redacted]"
"""What a key is replaced by."""

MIN_SECRET_CHARS = 8
"""The shortest value searched for as it is (see the module docstring)."""

_KEY_NAMES = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{6,}"  # OpenAI-style keys (sk-..., sk-proj-...)
    # an Authorization header's value: a token with a digit (not "Basic information")
    r"|\b(?:Bearer|Basic)(?:\s+|%20|\+)(?=[A-Za-z._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{6,}",
    re.IGNORECASE,
)

_lock = threading.Lock()
_env_names: set[str] = set()
_values: set[str] = set()
_pairs: set[tuple[str, str]] = set()


def remember_env(name: str | None) -> None:
    """Redact the value of ``name`` (a target's ``api_key_env``) from now on."""
    if name:
        with _lock:
            _env_names.add(name)


_USERINFO = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://([^/?#\s]*)@")


def remember_url(text: str | None) -> None:
    """Redact the credentials of every URL in ``text`` (``scheme://user:key@host``), in every
    form they travel."""
    for userinfo in _USERINFO.findall(text or ""):
        user, _, password = userinfo.partition(":")
        user, password = unquote(user), unquote(password)
        with _lock:
            # the password is the key; a URL with one name alone (``https://KEY@host``) holds it there
            _values.add(password or user)
            _pairs.add((user, password))


def _secrets() -> tuple[set[str], set[tuple[str, str]]]:
    with _lock:
        names, values, pairs = set(_env_names), set(_values), set(_pairs)
    for name, value in os.environ.items():
        if (name in names or _KEY_NAMES.search(name)) and value:
            values.add(value)
    return values, pairs


def _b64(text: str) -> set[str]:
    """``text`` base64-encoded, and without its padding (as it appears inside longer text)."""
    encoded = base64.b64encode(text.encode()).decode()
    return {encoded, encoded.rstrip("=")}


def forms(value: str) -> set[str]:
    """The texts ``value`` may appear as: itself, URL-encoded, base64."""
    return {value, quote(value, safe=""), quote_plus(value), *_b64(value)}


def _needles() -> list[str]:
    values, pairs = _secrets()
    needles: set[str] = set()
    for value in values:
        if len(value) >= MIN_SECRET_CHARS:
            needles |= forms(value)
    for user, password in pairs:
        needles |= {n for n in _b64(f"{user}:{password}") if len(n) >= MIN_SECRET_CHARS}
    # longest first: a value inside another's encoding is replaced after the longer one
    return sorted(needles, key=len, reverse=True)


def redactor() -> Callable[[str | None], str | None]:
    """``redact`` for the keys the process sees now, looked up once (for many texts)."""
    needles = _needles()

    def apply(text: str | None) -> str | None:
        if not text:
            return text
        for needle in needles:
            if needle in text:
                text = text.replace(needle, MARKER)
        return strip_url_credentials(_SHAPES.sub(MARKER, text))

    return apply


def redact(text: str | None) -> str | None:
    """``text`` with every key the process can see, in every form it travels, and every
    key-shaped token replaced by ``MARKER``."""
    return redactor()(text)


class _Redacting(logging.Filter):
    """Redacts a record's message (arguments merged) and its traceback text in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: logging reports it
            return True
        record.msg, record.args = redact(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER = _Redacting()


def install_log_redaction() -> None:
    """Redact every log record of the process as it is made, before any handler (a file, the
    console, Prefect's API) sees it."""
    make = logging.getLogRecordFactory()
    if getattr(make, "redacting", False):
        return

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = make(*args, **kwargs)
        _FILTER.filter(record)
        return record

    factory.redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
