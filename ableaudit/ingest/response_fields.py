"""The rules for one field of an imported response (task, temperature, sample index, text, names), shared by the row checks and the Arrow batch checks."""

from __future__ import annotations

import math
from typing import Any

from ableaudit.ingest import files

TASKS = ("text", "vision")


INT32_MAX = 2**31 - 1


class FieldError(ValueError):
    """One value of one row is wrong; the message is the fix, shared by every row it applies to."""


def is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def parse_task(value: Any) -> str:
    """'text' when empty; else one of TASKS (what stg_raw__generations accepts)."""
    if is_blank(value):
        return "text"
    task = str(value).strip().lower() if isinstance(value, str) else None
    if task not in TASKS:
        hint = files.did_you_mean(value, TASKS)
        raise FieldError(f"must be 'text' or 'vision' (empty means 'text'){hint}")
    return task


def parse_temperature(value: Any) -> float | None:
    """None when empty (unknown); else a finite number >= 0."""
    if is_blank(value):
        return None
    fix = "must be a finite number >= 0 (e.g. 0.7), or empty when unknown"
    if isinstance(value, bool):
        raise FieldError(fix)
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise FieldError(fix) from None
    if not math.isfinite(t) or t < 0:
        raise FieldError(fix)
    return t


def parse_sample_index(value: Any) -> int:
    """0 when empty; else a whole number from 0 to 2^31 - 1 (the column is an int32)."""
    if is_blank(value):
        return 0
    fix = f"must be a whole number from 0 to {INT32_MAX} (empty means 0)"
    if isinstance(value, bool):
        raise FieldError(fix)
    if isinstance(value, float):
        if not value.is_integer():
            raise FieldError(fix)
        value = int(value)
    try:
        n = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise FieldError(fix) from None
    if not 0 <= n <= INT32_MAX:
        raise FieldError(fix)
    return n


def parse_response_text(value: Any) -> str:
    """The text as given ('' when null: an empty answer); anything but a string is refused,
    since storing an object's repr would score a dict as if it were an answer."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError(
            "must be a string (the answer's text) or null; serialise structured output to "
            "text first"
        )
    return value


def parse_name(value: Any, default: str | None, what: str) -> str:
    """A non-empty name (model_id, arm, query_set); ``default`` when empty, if there is one."""
    if is_blank(value):
        if default is None:
            raise FieldError(f"must name the {what}; it is empty")
        return default
    if isinstance(value, (dict, list)):
        raise FieldError(f"must be a name (text), not a {type(value).__name__}")
    return str(value).strip()
