"""raw.runs: one row per audit run, with the config that produced it; one audit per warehouse at a time.

What a run stores is redacted: no credential in a URL, no value of a field named like a
secret. What a run leaves undone is counted here too, so the flow can end failed and say
which requests to send again.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ableaudit.config import AuditConfig
from ableaudit.keys import strip_url_credentials
from ableaudit.warehouse import run_lease
from ableaudit.warehouse.connection import connect

REDACTED = "[redacted]"

# A field whose name has one of these words holds a secret (`api_key`, `auth_token`, `password`);
# `api_key_env` names a variable (checked by the config), and `max_tokens` counts tokens.
_SECRET_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "auth", "credential"}
_SECRET_WORDS |= {w + "s" for w in _SECRET_WORDS - {"token"}}
_NOT_SECRET = {"api_key_env"}


def _secret_name(name: str) -> bool:
    if name in _NOT_SECRET:
        return False
    words = re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower())
    return any(w in _SECRET_WORDS for w in words)


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: REDACTED if _secret_name(str(k)) else _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    if isinstance(value, str):
        return strip_url_credentials(value)
    return value


def redacted_config_json(cfg: AuditConfig) -> str:
    """The config as raw.runs keeps it: what the run did, without a credential to leak.

    Every URL loses its userinfo and every field named like a secret (in ``options``,
    ``extra_body`` or anywhere else) becomes ``[redacted]``; the backend still gets the
    config as written.
    """
    return json.dumps(_redact(cfg.model_dump(mode="json")))


def start_run(warehouse: str | Path, run_id: str, cfg: AuditConfig) -> list[str]:
    """Take the warehouse for this run (``run_lease.RunConflict`` when another audit holds it);
    returns the runs found dead and marked 'interrupted'."""
    return run_lease.start_run(warehouse, run_id, redacted_config_json(cfg))


def finish_run(warehouse: str | Path, run_id: str, status: str) -> None:
    run_lease.finish_run(warehouse, run_id, status)


RETRY_HINT = "run the same command again: only the failed requests are sent"


@dataclass
class RunFailures:
    """The requests a run left as errors, by step and kind of error."""

    generations: Counter[str] = field(default_factory=Counter)
    """Generation rows of the run with status 'error', per kind of error."""
    judgments: Counter[str] = field(default_factory=Counter)
    """Judge calls of the run with call_status 'error', per kind of error."""

    def __bool__(self) -> bool:
        return bool(self.generations or self.judgments)

    def summary(self) -> str:
        """One message: how many requests failed, of which kinds, and how to retry them."""
        parts = []
        for what, kinds in (("generations", self.generations), ("judge calls", self.judgments)):
            if kinds:
                detail = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
                parts.append(f"{sum(kinds.values())} {what} failed ({detail})")
        return (
            "; ".join(parts)
            + ". What succeeded is landed (and built, unless the build was off); "
            + RETRY_HINT
            + "."
        )


class AuditIncomplete(Exception):
    """The audit ran to its end, but some of its requests failed; a re-run sends only those."""

    def __init__(self, failures: RunFailures) -> None:
        super().__init__(failures.summary())
        self.failures = failures


def error_kind(message: str | None) -> str:
    """What kind of failure an error message is: its exception type or leading ``HTTP nnn``.

    Messages are ``Type: detail`` (a raised exception), ``HTTP 500: detail`` (a server's
    answer) or a sentence; the detail varies request by request, the kind does not.
    """
    text = strip_url_credentials((message or "unknown error").strip())
    if m := re.match(r"(HTTP \d{3})\b", text):
        return m.group(1)
    if m := re.match(r"([A-Za-z_][\w.]*)(?=: )", text):
        return m.group(1)
    if m := re.match(r"all \d+ servers failed", text):
        return "all servers failed"
    return text.split(": ")[0][:60]


def run_failures(warehouse: str | Path, run_id: str) -> RunFailures:
    """The error rows this run left in raw.generations and raw.judgments."""
    con = connect(warehouse, read_only=True)
    try:
        generations = con.execute(
            "select error_message from raw.generations where run_id = ? and status = 'error'",
            [run_id],
        ).fetchall()
        judgments = con.execute(
            "select error_message from raw.judgments where run_id = ? and call_status = 'error'",
            [run_id],
        ).fetchall()
    finally:
        con.close()
    return RunFailures(
        generations=Counter(error_kind(m) for (m,) in generations),
        judgments=Counter(error_kind(m) for (m,) in judgments),
    )


class AuditInterrupted(Exception):
    """The audit stopped on a signal: what finished is landed, the run is 'interrupted'."""

    def __init__(self, signum: int, step: str, landed: int, left: int, planned: int) -> None:
        from ableaudit.stopping import signal_name

        self.signum = signum
        self.step = step
        self.landed = landed
        """Answers this run landed (errors included), all landed before the stop took effect."""
        self.left = left
        """Planned generations with no answer landed yet (a re-run asks for these)."""
        self.planned = planned
        """Generations the audit planned (those landed by earlier runs included)."""
        undone = "the rest of the audit" if step == "generation" else f"the {step} and what follows"
        super().__init__(
            f"stopped by {signal_name(signum)} during {step}: {landed} answers of this run "
            f"landed; {left} of {planned} planned answers still to generate, and {undone}"
        )
