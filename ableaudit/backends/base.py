"""One interface for every inference engine.

A backend turns a batch of ``GenerationRequest`` into the same number of
``GenerationResult``, in the same order. A failure of one item is a result with
``status='error'`` (never an exception that loses the rest of the batch), so the
landing task can record it and a later run can retry it. Errors that make the
whole backend unusable (bad model path, unreachable server) raise
``BackendError`` with a message naming the problem and the fix.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Sequence, runtime_checkable

from ableaudit.records import GenerationRequest, GenerationResult


class BackendError(RuntimeError):
    """A backend cannot be used at all: the message says what to fix.

    ``transient`` marks a failure that may pass on its own (a server still
    starting, a dropped connection): the audit retries those with backoff.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def requests_per_call(backend: Any, batch_size: int) -> int:
    """How many requests to hand a backend per ``generate`` call: its ``concurrency`` when it has one
    (an openai target with several replicas keeps ``batch_size`` in flight on each), else the batch size."""
    return max(1, int(getattr(backend, "concurrency", batch_size)))


def results_in_batches(backend: Any, requests: Sequence[GenerationRequest], size: int,
                       fail_batch: bool = False) -> Iterator[list[GenerationResult]]:
    """Every request's result, handed back in lists of up to ``size`` for landing.

    A backend with ``stream`` (the openai backend) keeps its requests in flight
    continuously and its results come in the order they complete: no batch
    waits for its slowest answer while the server idles. Others get ``generate``
    calls of ``size`` requests, in order. ``fail_batch``: an exception of a
    ``generate`` call becomes that batch's error results (else it propagates).
    A result for a key not asked for, or a ``generate`` call returning another
    number of results than asked, raises: every batch maps onto its requests.
    """
    name = getattr(backend, "name", backend)
    asked = {r.key for r in requests}

    def checked(results: list[GenerationResult]) -> list[GenerationResult]:
        unknown = [r.key for r in results if r.key not in asked]
        if unknown:
            raise RuntimeError(f"backend {name} returned results for keys it was not asked for: {unknown[:3]}")
        return results

    stream = getattr(backend, "stream", None)
    if stream is not None:
        batch: list[GenerationResult] = []
        for result in stream(requests):
            batch.append(result)
            if len(batch) >= size:
                yield checked(batch)
                batch = []
        if batch:
            yield checked(batch)
        return
    for start in range(0, len(requests), size):
        chunk = requests[start:start + size]
        try:
            results = backend.generate(chunk)
        except Exception as err:
            if not fail_batch:
                raise
            results = [GenerationResult.failed(r.key, err) for r in chunk]
        if len(results) != len(chunk):
            raise RuntimeError(f"backend {name} returned {len(results)} results for {len(chunk)} requests")
        yield checked(results)


def refuse_json_schema(req: GenerationRequest, backend: str) -> None:
    """Raise (failing that request) when a request asks for structured output this backend cannot give."""
    from ableaudit.config import STRUCTURED_OUTPUT_BACKENDS

    if req.json_schema is not None:
        raise ValueError(f"backend {backend} cannot constrain output to a JSON schema; structured output needs backend "
                         f"{', '.join(STRUCTURED_OUTPUT_BACKENDS)} (or set the judge's structured_output: off)")


def response_format(schema: dict) -> dict[str, Any]:
    """The OpenAI-style response_format for a JSON Schema (llama.cpp, vLLM and OpenAI read it alike)."""
    return {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": False}}


@runtime_checkable
class Backend(Protocol):
    name: str                     # 'transformers' | 'llamacpp' | 'openai' | 'vllm'
    model_revision: str | None    # what exactly was loaded (commit, file hash, served id)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]: ...

    def close(self) -> None: ...


@dataclass
class Stopwatch:
    start: float = field(default_factory=time.perf_counter)

    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000.0
