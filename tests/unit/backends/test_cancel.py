"""Cancelling a backend: what finished comes back, what was cut off has no result at all, and
the engine stops early (llama.cpp between two tokens, the openai backend without waiting for
the replies in flight)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from ableaudit.backends import make_backend
from ableaudit.backends.base import (
    Backend,
    GenerationCancelled,
    GenerationRequest,
    GenerationResult,
    results_in_batches,
)
from ableaudit.config import Target
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer


def _req(key: str, text: str, max_new_tokens: int = 16) -> GenerationRequest:
    return GenerationRequest(
        key=key,
        messages=({"role": "user", "content": text},),
        temperature=0.0,
        max_new_tokens=max_new_tokens,
    )


class _Batches(Backend):
    """A backend without stream: answers each request, or fails it when its text says so, and
    is cancelled in the middle of the batch that holds 'STOP'."""

    name = "batches"

    def __init__(self) -> None:
        self.model_revision = "fake"
        self.concurrency = 3
        self.calls = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.calls += 1
        out = []
        for r in requests:
            text = r.messages[-1]["content"]
            if text == "STOP":
                self.cancel()
                raise GenerationCancelled(out)
            out.append(
                GenerationResult.failed(r.key, "boom")
                if text == "FAIL"
                else GenerationResult.from_text(r.key, "answer " + text)
            )
        return out

    def close(self) -> None:
        pass


def test_results_in_batches_hands_back_what_finished_then_stops():
    """Batch 1 lands whole; batch 2 is cut at 'STOP': its finished answer comes back, its error
    (which the stop may have caused) does not, and no later batch is asked for."""
    backend = _Batches()
    texts = ["a", "b", "c", "d", "FAIL", "STOP", "g", "h"]
    seen: list[str] = []
    batches = []
    with pytest.raises(GenerationCancelled):
        for batch in results_in_batches(
            backend,
            [_req(f"k{i}", t) for i, t in enumerate(texts)],
            3,
            on_result=lambda r: seen.append(r.key),
        ):
            batches.append([r.key for r in batch])
    assert batches == [["k0", "k1", "k2"], ["k3"]]
    assert seen == ["k0", "k1", "k2", "k3"]  # progress per answer
    assert backend.calls == 2
    assert backend.cancelled


def test_cancel_is_idempotent_and_per_backend():
    a, b = _Batches(), _Batches()
    a.cancel()
    a.cancel()
    assert a.cancelled and a.cancel_future.done()
    assert not b.cancelled


class _CountingServer:
    """Wraps an xllamacpp server: counts each request's streamed chunks, and cancels the backend
    once the request named in ``cancel_at`` has streamed that many."""

    def __init__(self, server, backend: Backend, cancel_at: tuple[str, int]) -> None:
        self.server, self.backend, self.cancel_at = server, backend, cancel_at
        self.chunks: dict[str, int] = {}

    def handle_chat_completions(self, payload: dict, callback):
        key = payload["messages"][-1]["content"]

        def counted(chunk):
            self.chunks[key] = self.chunks.get(key, 0) + 1
            if (key, self.chunks[key]) == self.cancel_at:
                self.backend.cancel()
            return callback(chunk)

        return self.server.handle_chat_completions(payload, counted)


@pytest.mark.slow
def test_llamacpp_stops_between_two_tokens():
    """SmolLM2 answers a short request, then is cancelled 5 tokens into a 400-token one: the
    generation ends at the next token, the short answer comes back, the long one has no
    result, and the third request is never started."""
    backend = make_backend(
        Target(
            name="smol",
            backend="llamacpp",
            model="builtin:smollm2",
            options={"n_ctx": 1024, "n_threads": 1, "n_parallel": 1},
        )
    )
    long = "Write a very long story about a lighthouse keeper."
    counting = _CountingServer(backend._server, backend, (long, 5))
    backend._server = counting
    try:
        with pytest.raises(GenerationCancelled) as stop:
            backend.generate(
                [_req("short", "Say yes.", 4), _req("long", long, 400), _req("next", "Hi.", 4)]
            )
    finally:
        backend._server = counting.server
        backend.close()
    assert [r.key for r in stop.value.finished] == ["short"]
    assert stop.value.finished[0].status == "ok"
    assert counting.chunks[long] <= 6  # the chunk that saw the cancel was the last
    assert "Hi." not in counting.chunks


@pytest.fixture
def slow_server():
    server = FakeOpenAIServer()
    server.delay_s = 3.0
    yield server
    server.close()


def test_openai_stops_waiting_for_replies_in_flight(slow_server):
    """Two requests in flight, two queued: cancel() ends the stream before any reply arrives,
    and the queued requests are never sent."""
    backend = make_backend(
        Target(
            name="slow",
            backend="openai",
            model=SERVED_ID,
            base_url=slow_server.base_url,
            batch_size=2,
            api_key_env="ABLEAUDIT_TEST_NO_SUCH_KEY",
        )
    )
    outcome: dict[str, object] = {}

    def consume() -> None:
        try:
            outcome["results"] = list(backend.stream([_req(f"k{i}", f"q{i}") for i in range(4)]))
        except GenerationCancelled:
            outcome["cancelled"] = len(slow_server.spans)  # replies the server had sent by then

    reader = threading.Thread(target=consume)
    reader.start()
    deadline = time.monotonic() + 10
    while slow_server.inflight < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    backend.cancel()
    reader.join(timeout=10)
    assert outcome == {"cancelled": 0}
    time.sleep(slow_server.delay_s + 0.5)  # the two in flight end at the server, unread
    assert len(slow_server.payloads) == 2
    backend.close()


@pytest.mark.slow
def test_transformers_stops_at_the_next_token(tiny_chat_model_dir):
    """Three short answers finish in a first batch; the long one is cancelled two tokens in:
    the model runs no further step, and only the short answers come back."""
    backend = make_backend(
        Target(
            name="tiny",
            backend="transformers",
            model=str(tiny_chat_model_dir),
            batch_size=3,
            options={"device": "cpu", "ignore_eos": True},
        )
    )
    steps: list[int] = []  # the batch size of every forward pass

    def count(module, args, kwargs, output):
        steps.append(kwargs["input_ids"].shape[0] if "input_ids" in kwargs else args[0].shape[0])
        if steps[-1] == 1 and steps.count(1) == 2:
            backend.cancel()

    hook = backend.model.register_forward_hook(count, with_kwargs=True)
    try:
        with pytest.raises(GenerationCancelled) as stop:
            backend.generate(
                [_req(f"s{i}", f"short {i}", 3) for i in range(3)] + [_req("long", "x", 60)]
            )
    finally:
        hook.remove()
        backend.close()
    assert sorted(r.key for r in stop.value.finished) == ["s0", "s1", "s2"]
    assert steps.count(3) == 3  # the short batch ran to its end
    assert steps.count(1) == 2  # the long one stopped right after the step that saw the cancel
