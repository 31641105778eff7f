"""The openai backend against a fault-injecting server on 127.0.0.1 (tests.fixtures.fault_server):
what each fault becomes, and the in-flight window of ``stream``.

Every fault goes over a real socket; the client is the real ``openai`` client.
"""

from __future__ import annotations

import time

import pytest

from ableaudit.backends import BackendError, make_backend
from ableaudit.backends.base import results_in_batches
from ableaudit.config import Target
from ableaudit.records import GenerationRequest
from tests.fixtures.fault_server import FAULTS, HARMLESS, PERMANENT, TRANSIENT, FaultServer
from tests.fixtures.openai_server import SERVED_ID

# what a permanent fault's error message starts with (the error kind the run summary counts)
ERROR_KIND = {
    "malformed": "malformed reply",
    "truncated": "malformed reply",
    "no_choices": "malformed reply",
    "null_content": "no content",
    "http400": "HTTP 400",
}


@pytest.fixture
def server():
    s = FaultServer(slow_s=1.5)
    yield s
    s.close()


def _backend(server: FaultServer, **options):
    options = {"max_retries": 1, "timeout_s": 0.8, **options}
    batch_size = options.pop("batch_size", 1)
    target = Target(
        name="faulty",
        backend="openai",
        model=SERVED_ID,
        base_url=server.base_url,
        batch_size=batch_size,
        api_key_env="ABLEAUDIT_TEST_NO_SUCH_KEY",
        options=options,
    )
    return make_backend(target)


def _req(key: str, text: str) -> GenerationRequest:
    return GenerationRequest(key=key, messages=({"role": "user", "content": text},))


def test_every_fault_is_classified():
    assert set(TRANSIENT) | set(PERMANENT) | set(HARMLESS) == set(FAULTS)
    assert set(ERROR_KIND) == set(PERMANENT)


@pytest.mark.parametrize("kind", TRANSIENT)
def test_a_transient_fault_is_retried_and_the_answer_comes_back(server, kind):
    # a refusing server is back after 1 s: the client's third attempt (~1.2 s) gets through
    b = _backend(server, max_retries=3 if kind == "refuse" else 1)
    server.inject(kind, prompts=1, attempts=1)
    (r,) = b.generate([_req("k", "hello there")])
    assert (r.status, r.text) == ("ok", "echo: hello there"), r.error
    assert server.asked["hello there"] == 2 and server.faults[kind] == 1
    first, second = server.ask_times["hello there"]
    if kind == "http429":  # the retry waited as Retry-After said (a lower bound: never flaky)
        assert second - first >= 0.9
    if kind == "refuse":  # the answer came once the server listened again, 1 s later
        (reopened,) = server.reopened
        assert reopened - first >= server.refuse_s and second >= reopened
    b.close()


@pytest.mark.parametrize("kind", TRANSIENT)
def test_a_transient_fault_that_persists_is_an_error_result_after_the_retries(server, kind):
    b = _backend(server)
    (r,) = b.generate([_req("k", f"FAULT={kind} again and again")])
    assert r.status == "error" and r.text is None
    # the first attempt and max_retries 1 (refused: the retry never reaches the server)
    assert server.requests == (1 if kind == "refuse" else 2)
    b.close()


@pytest.mark.parametrize("kind", PERMANENT)
def test_a_permanent_fault_is_an_error_result_sent_once(server, kind):
    b = _backend(server)
    server.inject(kind, prompts=1, attempts=1)
    (r,) = b.generate([_req("k", "hello there")])
    assert r.status == "error" and r.text is None and r.model_revision is None
    assert r.error.startswith(ERROR_KIND[kind]), r.error
    assert server.asked["hello there"] == 1
    b.close()


@pytest.mark.parametrize("kind", HARMLESS)
def test_bad_token_counts_land_as_null_with_the_answer(server, kind, caplog):
    b = _backend(server)
    server.inject(kind, prompts=2, attempts=1)
    got = b.generate([_req("a", "one two"), _req("b", "three four")])
    assert [(r.status, r.text, r.prompt_tokens, r.completion_tokens) for r in got] == [
        ("ok", "echo: one two", None, None),
        ("ok", "echo: three four", None, None),
    ]
    warned = [m for m in caplog.messages if "token counts" in m]
    assert len(warned) == (1 if kind == "bad_usage" else 0)  # once per backend, not per reply
    b.close()


def test_stream_sends_at_most_the_window_ahead_of_the_consumer(server):
    """A consumer that takes its time holds the sending back: after taking n answers, at most
    n + window requests have reached the server, however long it waits."""
    b = _backend(server, batch_size=4, window=3)
    assert b.concurrency == 4 and b.window == 3
    stream = b.stream([_req(f"k{i}", f"prompt {i}") for i in range(12)])
    taken = 0
    for _ in stream:
        taken += 1
        time.sleep(0.1)  # an unbounded stream sends everything meanwhile
        assert server.requests <= taken + 3
    assert taken == 12 and server.requests == 12
    b.close()


def test_the_window_defaults_to_the_concurrency_and_bounds_a_batching_consumer(server):
    """Landing in batches of ``size``: when a batch is handed over, the answers sent and not
    landed are at most window + size - 1."""
    b = _backend(server, batch_size=3)
    assert b.window == b.concurrency == 3
    landed = 0
    batches = results_in_batches(b, [_req(f"k{i}", f"prompt {i}") for i in range(14)], 2)
    for batch in batches:
        time.sleep(0.1)  # landing takes a while
        assert server.requests - landed <= 3 + 2 - 1
        landed += len(batch)
    assert landed == 14 and server.requests == 14
    b.close()


@pytest.mark.parametrize("window", [0, -2, "4", 2.5, True])
def test_a_bad_window_fails_at_once_naming_the_option(server, window):
    with pytest.raises(BackendError, match=r"option window must be a whole number of at least 1"):
        _backend(server, window=window)
