"""One interface for every inference engine.

A backend turns a batch of ``GenerationRequest`` into the same number of
``GenerationResult``, in the same order. A failure of one item is a result with
``status='error'`` (never an exception that loses the rest of the batch), so the
landing task can record it and a later run can retry it. Errors that make the
whole backend unusable (bad model path, unreachable server) raise
``BackendError`` with a message naming the problem and the fix. Each answered
result carries the ``model_revision`` that answered it (the replica, the loaded
checkpoint, the GGUF file), which lands in place of the planned revision.
``cancel()`` (any thread) stops a backend early: it hands back what finished and
raises ``GenerationCancelled``; what was cut off has no result at all.

What a backend can do is declared on ``Backend`` (an abstract base class) and
read by callers directly; backends are found by name in ``registry.py``.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ableaudit.errors import AbleauditError
from ableaudit.records import GenerationRequest, GenerationResult


class BackendError(AbleauditError, RuntimeError):
    """A backend cannot be used at all: the message says what to fix.

    ``transient`` marks a failure that may pass on its own (a server still
    starting, a dropped connection): the audit retries those with backoff.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class GenerationCancelled(Exception):
    """A backend stopped generating because ``cancel()`` was called (an audit asked to stop).

    ``finished`` holds the answers that completed before the stop and were not handed back
    yet; requests without an answer have no result at all (never an error result), so a
    re-run asks for them again.
    """

    def __init__(self, finished: Sequence[GenerationResult] = ()) -> None:
        super().__init__("generation cancelled")
        self.finished = list(finished)


class Backend(ABC):
    """An inference engine behind the audit's one interface, with its capabilities declared.

    Every backend states, as class attributes, what it can do (stream, structured
    output, images) and, per instance, how many requests to hand it at once and
    which model it runs. Callers read these directly: a capability is declared
    here, never probed on the object, so a new backend shows in one place what it
    offers and a missing declaration fails at once instead of silently taking a
    default path.
    """

    name: ClassVar[str]
    """The name a target's ``backend:`` gives (the registry key): transformers, llamacpp, openai, vllm."""
    supports_stream: ClassVar[bool] = False
    """``stream`` keeps requests in flight and yields results as they complete; without it callers hand
    ``generate`` batches of ``concurrency`` requests. What runs ahead of the consumer is bounded, so a
    kill loses a bounded number of answers: the openai backend has at most ``window`` requests
    outstanding and sends the next when the consumer comes back for a result; the vllm worker
    generates ``part_rows`` at a time."""
    supports_json_schema: ClassVar[bool] = False
    """It can constrain a completion to a JSON schema (judges' structured output); without it a request
    with ``json_schema`` fails (``registry.refuse_json_schema``) rather than come back unconstrained."""
    json_schema_by_default: ClassVar[bool] = False
    """A judge's ``structured_output: auto`` turns structured output on: the engine is known to honour it
    (an OpenAI-compatible server may lack it, so there it is the user's call)."""
    supports_images: ClassVar[bool] = False
    """It sends a request's ``images`` to the model: it can serve a vision target (``task: vision``)."""

    model_revision: str | None
    """What is loaded or served as a whole (a commit, a file digest, a served model id); each result
    carries the revision that answered it in ``GenerationResult.model_revision``."""
    concurrency: int
    """How many requests to hand it at once: a streaming backend keeps this many in flight, others get
    ``generate`` calls of this many; results land in batches of it."""

    @abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """One result per request, in the requests' order; a failed request is an error result."""

    def stream(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """Every request's result, in the order they complete (backends with ``supports_stream``)."""
        raise NotImplementedError(
            f"backend {self.name} does not stream (supports_stream is false); call generate"
        )

    @abstractmethod
    def close(self) -> None:
        """Free what the backend holds (a model, server connections); it is not used afterwards."""

    @property
    def cancelled(self) -> bool:
        """``cancel()`` was called: generation stops at the engine's next chance."""
        return self.cancel_future.done()

    @property
    def cancel_future(self) -> Future[None]:
        """Completes when ``cancel()`` is called: wait on it beside the requests in flight
        (``concurrent.futures.wait`` or ``as_completed``) to stop waiting at once."""
        # made lazily: backends do not call a base __init__
        return self.__dict__.setdefault("_cancel_future", Future())

    def cancel(self) -> None:
        """Stop generating soon, from any thread (a signal handler included).

        ``generate`` and ``stream`` then raise ``GenerationCancelled``, carrying the answers
        that finished; requests still in flight are abandoned without a result. Each backend
        stops as early as its engine lets it: llama.cpp and transformers between two tokens,
        an HTTP backend by no longer waiting for the replies in flight.
        """
        with contextlib.suppress(InvalidStateError):
            self.cancel_future.set_result(None)


def results_in_batches(
    backend: Backend,
    requests: Sequence[GenerationRequest],
    size: int,
    fail_batch: bool = False,
    on_result: Callable[[GenerationResult], None] | None = None,
) -> Iterator[list[GenerationResult]]:
    """Every request's result, handed back in lists of up to ``size`` for landing.

    A backend that streams (``supports_stream``: the openai and vllm backends)
    keeps its requests in flight continuously and its results come in the order
    they complete: no batch waits for its slowest answer while the server idles.
    The stream is pulled only while a batch fills, never while the caller lands
    one, so with the openai backend the answers a kill can lose (sent and not
    landed) are at most ``window + size - 1``: while a batch fills, ``window``
    outstanding and up to ``size - 1`` held; while it lands, ``window - 1``
    outstanding (the last answer's place is refilled on the next pull) and
    ``size`` held.
    Others get ``generate`` calls of ``size`` requests, in order. ``fail_batch``:
    an exception of a ``generate`` call becomes that batch's error results (else
    it propagates). A result for a key not asked for, or a ``generate`` call
    returning another number of results than asked, raises: every batch maps
    onto its requests.

    ``on_result`` is called once per result as soon as it is back (progress moves per
    answer, not per batch). When the backend is cancelled, the answers that finished are
    handed back as a last, possibly short, batch, and then ``GenerationCancelled`` is
    raised; an error result that comes back after the cancel is dropped (the stop may
    have caused it; a re-run asks again).
    """
    name = backend.name
    asked = {r.key for r in requests}

    def checked(results: list[GenerationResult]) -> list[GenerationResult]:
        unknown = [r.key for r in results if r.key not in asked]
        if unknown:
            raise RuntimeError(
                f"backend {name} returned results for keys it was not asked for: {unknown[:3]}"
            )
        if backend.cancelled:
            results = [r for r in results if r.status != "error"]
        for r in results:
            if on_result is not None:
                on_result(r)
        return results

    if backend.supports_stream:
        batch: list[GenerationResult] = []
        try:
            with contextlib.closing(backend.stream(requests)) as results:
                for result in results:
                    batch += checked([result])
                    if len(batch) >= size:
                        yield batch
                        batch = []
                    if backend.cancelled:
                        raise GenerationCancelled()
        except GenerationCancelled as stop:
            batch += checked(stop.finished)
            if batch:
                yield batch
            raise GenerationCancelled() from None
        if batch:
            yield batch
        return
    for start in range(0, len(requests), size):
        chunk = requests[start : start + size]
        if backend.cancelled:
            raise GenerationCancelled()
        try:
            results = backend.generate(chunk)
        except GenerationCancelled as stop:
            finished = checked(stop.finished)
            if finished:
                yield finished
            raise GenerationCancelled() from None
        except Exception as err:
            if not fail_batch:
                raise
            results = [GenerationResult.failed(r.key, err) for r in chunk]
        if len(results) != len(chunk):
            raise RuntimeError(
                f"backend {name} returned {len(results)} results for {len(chunk)} requests"
            )
        yield checked(results)


def response_format(schema: dict) -> dict[str, Any]:
    """The OpenAI-style response_format for a JSON Schema (llama.cpp, vLLM and OpenAI read it alike)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": schema, "strict": False},
    }


@dataclass
class Stopwatch:
    start: float = field(default_factory=time.perf_counter)

    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000.0
