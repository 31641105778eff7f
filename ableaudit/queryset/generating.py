"""Generator calls of the query-set pipeline, content-addressed like an audit's generations.

A call's key is a hash of everything that determines its answer: the generator
(backend, model fingerprint with its revision, adapter, decoding), the stage's
prompt version, the messages and the JSON schema it was constrained to. Keys
landed as results are never asked again (a resumed build regenerates nothing);
a landed error is asked again on the next build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ableaudit.backends.base import Backend, GenerationRequest, results_in_batches
from ableaudit.keys import content_key, model_fingerprint
from ableaudit.queryset.config import BuildConfig
from ableaudit.queryset.prompts import PROMPT_VERSIONS, SCHEMAS
from ableaudit.warehouse.queryset_landing import (
    land_queryset_generations,
    landed_queryset_generations,
)

DEFAULT_TEMPERATURE = 0.7
"""The sampling temperature when the generator's decoding leaves it unset: personas of one
domain come from one call, so some variety is wanted."""


def generator_identity(cfg: BuildConfig) -> dict[str, Any]:
    """Everything about the generator that determines its answers (its name does not)."""
    t = cfg.generator
    d = t.decoding
    return {
        "backend": t.backend,
        "model": model_fingerprint(t.model, t.revision),
        "adapter": model_fingerprint(t.adapter) if t.adapter else None,
        "decoding": {
            "temperature": temperature(cfg),
            "top_p": d.top_p,
            "max_new_tokens": d.max_new_tokens,
            "seed": d.seed,
        },
    }


def temperature(cfg: BuildConfig) -> float:
    t = cfg.generator.decoding.temperature
    return DEFAULT_TEMPERATURE if t is None else t


@dataclass(frozen=True)
class Ask:
    """One generator call a stage needs."""

    key: str
    """The call's generation_id."""
    stage: str
    """'personas' | 'queries' | 'leakage_check'."""
    domain: str
    """The domain asked about."""
    persona_id: str | None
    """The persona a query or check is for."""
    messages: tuple[dict, ...]
    """System and user message."""
    schema: dict | None
    """The JSON schema the answer is constrained to, when structured."""


def make_ask(
    identity: dict[str, Any],
    structured: bool,
    stage: str,
    domain: str,
    persona_id: str | None,
    messages: tuple[dict, ...],
    schema: dict | None = None,
) -> Ask:
    """The call of ``stage`` with ``messages``; ``schema`` (default: the stage's) constrains
    its answer when ``structured``."""
    schema = (schema or SCHEMAS[stage]) if structured else None
    key = content_key(
        {
            "generator": identity,
            "stage": stage,
            "prompt_version": PROMPT_VERSIONS[stage],
            "messages": messages,
            "schema": schema,
        }
    )
    return Ask(key, stage, domain, persona_id, messages, schema)


@dataclass
class StageReport:
    """What a stage's calls came to."""

    asked: int = 0
    """Calls the stage needs."""
    landed_before: int = 0
    """Of those, answered by an earlier build (not asked again)."""
    generated: int = 0
    """Answered now."""
    errors: int = 0
    """Failed now (asked again by the next build)."""
    answers: dict[str, str] = field(default_factory=dict)
    """The answer text per key (ok or empty), landed before or now."""


class LazyBackend:
    """The generator's backend, started on first use and shared by every stage."""

    def __init__(self, factory: Callable[[], Backend]) -> None:
        self.factory = factory
        self.backend: Backend | None = None

    def get(self) -> Backend:
        if self.backend is None:
            self.backend = self.factory()
        return self.backend

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None


def run_asks(
    warehouse: str | Path,
    cfg: BuildConfig,
    asks: Sequence[Ask],
    backend: LazyBackend,
) -> StageReport:
    """Answer ``asks``: what has landed is read back, the rest is generated and landed as
    it comes (a batch at a time, so a stopped build keeps what finished)."""
    unique = list({a.key: a for a in asks}.values())
    report = StageReport(asked=len(unique))
    landed = landed_queryset_generations(warehouse, [a.key for a in unique])
    report.landed_before = len(landed)
    report.answers = {k: v["response_text"] or "" for k, v in landed.items()}
    todo = [a for a in unique if a.key not in landed]
    if not todo:
        return report
    d = cfg.generator.decoding
    by_key = {a.key: a for a in todo}
    requests = [
        GenerationRequest(
            key=a.key,
            messages=a.messages,
            temperature=temperature(cfg),
            top_p=d.top_p,
            max_new_tokens=d.max_new_tokens,
            seed=d.seed,
            json_schema=a.schema,
        )
        for a in todo
    ]
    fingerprint = model_fingerprint(cfg.generator.model, cfg.generator.revision)
    for batch in results_in_batches(
        backend.get(), requests, cfg.generator.batch_size, fail_batch=True
    ):
        rows = []
        for r in batch:
            a = by_key[r.key]
            rows.append(
                {
                    "generation_id": a.key,
                    "query_set": cfg.query_set,
                    "stage": a.stage,
                    "domain": a.domain,
                    "persona_id": a.persona_id,
                    "generator_model": cfg.generator.model,
                    "generator_revision": r.model_revision or fingerprint,
                    "backend": cfg.generator.backend,
                    "prompt_version": PROMPT_VERSIONS[a.stage],
                    "seed": d.seed,
                    "temperature": temperature(cfg),
                    "max_new_tokens": d.max_new_tokens,
                    "structured": a.schema is not None,
                    "prompt_text": a.messages[-1]["content"],
                    "status": r.status,
                    "response_text": r.text if r.status != "error" else None,
                    "error_message": r.error,
                }
            )
            if r.status == "error":
                report.errors += 1
            else:
                report.generated += 1
                report.answers[r.key] = r.text or ""
        land_queryset_generations(warehouse, rows)
    return report
