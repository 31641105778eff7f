"""The openai backend against a real HTTP server on 127.0.0.1 (and against llama.cpp's own server).

The fake server speaks just enough of the OpenAI chat API, echoes
deterministically, records every payload and header, and can be told to fail
with 500s, so retries, concurrency and the wire format are checked on the
socket, not on a mocked client.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from pathlib import Path

import pytest

from ableaudit.backends import BackendError, make_backend
from ableaudit.config import Target
from ableaudit.records import GenerationRequest
from tests.fixtures.openai_server import JPEG, PNG, SERVED_ID, SNAPSHOT_ID, FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def server():
    s = FakeOpenAIServer()
    yield s
    s.close()


def _target(base_url: str | list[str], **kw) -> Target:
    kw.setdefault("api_key_env", "ABLEAUDIT_TEST_NO_SUCH_KEY")
    return Target(
        name="echo", backend="openai", model=kw.pop("model", SERVED_ID), base_url=base_url, **kw
    )


def _req(key: str, text: str, **kw) -> GenerationRequest:
    return GenerationRequest(
        key=key,
        messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": text}),
        **kw,
    )


def test_payload_results_and_revision(server, monkeypatch):
    monkeypatch.delenv("ABLEAUDIT_TEST_NO_SUCH_KEY", raising=False)
    b = make_backend(_target(server.base_url, batch_size=2))
    assert b.model_revision == SERVED_ID
    res = b.generate(
        [
            _req("a", "hello there", temperature=0.1, top_p=0.9, max_new_tokens=50, seed=3),
            _req("b", "one two three four five", temperature=0.0, max_new_tokens=3),
        ]
    )
    assert [r.key for r in res] == ["a", "b"]
    a, bb = res
    assert (a.status, a.text, a.finish_reason, a.prompt_tokens, a.completion_tokens) == (
        "ok",
        "echo: hello there",
        "stop",
        4,
        3,
    )
    assert (bb.text, bb.finish_reason, bb.completion_tokens) == ("echo: one two", "length", 3)
    assert a.latency_ms > 0
    p = next(p for p in server.payloads if "hello there" in json.dumps(p))
    assert p["model"] == SERVED_ID
    assert p["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there"},
    ]
    assert (p["temperature"], p["top_p"], p["max_tokens"], p["seed"]) == (0.1, 0.9, 50, 3)
    assert "seed" not in next(p for p in server.payloads if "one two" in json.dumps(p))
    # no key in the env and a local server -> "EMPTY"
    assert {h.get("authorization") for h in server.headers} == {"Bearer EMPTY"}
    assert b.model_revision == f"{SNAPSHOT_ID}@fp_test"  # what the server says actually ran
    assert {r.model_revision for r in res} == {
        f"{SNAPSHOT_ID}@fp_test"
    }  # and each result says it answered
    b.close()


def test_images_are_sent_as_data_url_parts(server):
    b = make_backend(_target(server.base_url))
    res = b.generate(
        [
            _req("img", "describe these", images=(PNG, JPEG), max_new_tokens=20),
            _req("junk", "describe", images=(b"not an image",)),
            _req("plain", "no image", max_new_tokens=20),
        ]
    )
    assert [r.status for r in res] == ["ok", "error", "ok"]
    assert "PNG, JPEG" in res[1].error
    assert res[0].text == "echo: describe these"
    p = next(p for p in server.payloads if "describe these" in json.dumps(p))
    assert p["messages"][0] == {"role": "system", "content": "Be brief."}
    parts = p["messages"][1]["content"]
    assert parts[0] == {"type": "text", "text": "describe these"}
    urls = [q["image_url"]["url"] for q in parts[1:]]
    assert [q["type"] for q in parts[1:]] == ["image_url", "image_url"]
    assert urls[0].startswith("data:image/png;base64,") and urls[1].startswith(
        "data:image/jpeg;base64,"
    )
    assert base64.b64decode(urls[0].split(",", 1)[1]) == PNG
    assert base64.b64decode(urls[1].split(",", 1)[1]) == JPEG
    assert server.posts_for('describe"') == 0  # the junk-image request never left the client


def test_an_image_over_the_byte_cap_is_an_error_row_never_read_nor_sent(server, tmp_path):
    """A landed image that grew past the cap (a sparse 4 GiB file here) fails its request with
    the cap and the environment variable named; its neighbour is sent."""
    from ableaudit.media import MAX_IMAGE_BYTES_ENV
    from ableaudit.records import ImageRef

    (tmp_path / "ok.png").write_bytes(PNG)
    (tmp_path / "huge.png").write_bytes(PNG)
    os.truncate(tmp_path / "huge.png", 4 << 30)
    b = make_backend(_target(server.base_url))
    res = b.generate(
        [
            _req("huge", "describe huge", images=(ImageRef(str(tmp_path), "huge.png"),)),
            _req("ok", "describe ok", images=(ImageRef(str(tmp_path), "ok.png"),)),
        ]
    )
    assert [r.status for r in res] == ["error", "ok"]
    assert "image 'huge.png' under" in res[0].error
    assert "the file is 4,294,967,296 bytes" in res[0].error and MAX_IMAGE_BYTES_ENV in res[0].error
    assert server.posts_for("describe huge") == 0 and server.posts_for("describe ok") == 1
    b.close()
    b.close()


def test_retries_on_500_then_succeeds(server):
    b = make_backend(_target(server.base_url, options={"max_retries": 3}))
    server.fail_next = 2
    t0 = time.perf_counter()
    (r,) = b.generate([_req("r", "retry me")])
    assert r.status == "ok" and r.text == "echo: retry me"
    assert server.posts_for("retry me") == 3
    assert time.perf_counter() - t0 >= 0.04  # two waits of the server's Retry-After (20 ms)
    b.close()


def test_gives_up_after_max_retries_and_keeps_the_rest(server):
    b = make_backend(_target(server.base_url, batch_size=1, options={"max_retries": 1}))
    server.fail_next = 2
    res = b.generate(
        [_req("x", "always fails"), _req("y", "fine"), _req("z", "BAD_REQUEST please")]
    )
    assert (
        res[0].status == "error" and "500" in res[0].error and "temporary overload" in res[0].error
    )
    assert server.posts_for("always fails") == 2  # 1 try + 1 retry
    assert res[1].status == "ok" and res[1].text == "echo: fine"
    assert (
        res[2].status == "error"
        and "400" in res[2].error
        and "longer than the context" in res[2].error
    )
    assert server.posts_for("BAD_REQUEST") == 1  # 4xx is not retried
    b.close()


def test_requests_run_concurrently_up_to_batch_size(server):
    server.delay_s = 0.3
    b = make_backend(_target(server.base_url, batch_size=3))
    reqs = [_req(f"k{i}", f"number {i}") for i in range(6)]
    t0 = time.perf_counter()
    res = b.generate(reqs)
    elapsed = time.perf_counter() - t0
    assert [r.text for r in res] == [f"echo: number {i}" for i in range(6)]
    assert server.max_inflight == 3
    assert elapsed < 6 * 0.3  # not sequential
    b.close()


def test_whole_backend_problems_raise(server, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    t0 = time.perf_counter()
    with pytest.raises(BackendError, match="cannot reach"):
        make_backend(_target(f"http://127.0.0.1:{dead_port}/v1"))
    assert time.perf_counter() - t0 < 15
    with pytest.raises(BackendError, match="does not serve model 'other'"):
        make_backend(_target(server.base_url, model="other"))
    monkeypatch.delenv("ABLEAUDIT_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(BackendError, match="ABLEAUDIT_TEST_NO_SUCH_KEY"):
        make_backend(_target("https://api.example.com/v1"))
    with pytest.raises(BackendError, match="adapter"):
        make_backend(_target(server.base_url), adapter="/some/lora")


def test_api_key_from_named_env_var(server, monkeypatch):
    monkeypatch.setenv("ABLEAUDIT_TEST_KEY", "sk-test-123")
    b = make_backend(_target(server.base_url, api_key_env="ABLEAUDIT_TEST_KEY"))
    b.generate([_req("k", "key check")])
    assert server.headers[-1]["authorization"] == "Bearer sk-test-123"
    b.close()


def test_base_url_from_env(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    b = make_backend(
        Target(
            name="e", backend="openai", model=SERVED_ID, api_key_env="ABLEAUDIT_TEST_NO_SUCH_KEY"
        )
    )
    assert b.generate([_req("k", "from env")])[0].text == "echo: from env"
    b.close()


@pytest.mark.slow
def test_against_llama_cpp_http_server():
    """xllamacpp's Server also listens on HTTP: the openai backend must give the embedded backend's greedy text."""
    llama = make_backend(
        Target(
            name="smol",
            backend="llamacpp",
            model="builtin:smollm2",
            options={"n_ctx": 512, "n_threads": 2},
        )
    )
    try:
        url = llama._server.listening_address + "/v1"
        import openai

        served = openai.OpenAI(base_url=url, api_key="EMPTY").models.list().data[0].id
        http = make_backend(
            Target(
                name="smol-http",
                backend="openai",
                model=served,
                base_url=url,
                api_key_env="ABLEAUDIT_TEST_NO_SUCH_KEY",
            )
        )
        req = _req("q", "Name one primary colour.", temperature=0.0, max_new_tokens=12)
        via_http = http.generate([req])[0]
        embedded = llama.generate([req])[0]
        assert via_http.status == "ok" and via_http.text == embedded.text
        assert (via_http.prompt_tokens, via_http.completion_tokens) == (
            embedded.prompt_tokens,
            embedded.completion_tokens,
        )
        assert http.model_revision.startswith(served)
        http.close()
    finally:
        llama.close()


@pytest.fixture
def replicas():
    servers = [FakeOpenAIServer(), FakeOpenAIServer()]
    yield servers
    for s in servers:
        s.close()


def _answered(server: FakeOpenAIServer, prefix: str) -> int:
    return sum(1 for p in server.payloads if prefix in json.dumps(p))


def test_requests_spread_over_replicas_up_to_batch_size_each(replicas):
    a, b = replicas
    a.delay_s = b.delay_s = 0.2
    backend = make_backend(_target([a.base_url, b.base_url], batch_size=2))
    assert backend.concurrency == 4
    t0 = time.perf_counter()
    res = backend.generate([_req(f"k{i}", f"spread {i}") for i in range(8)])
    elapsed = time.perf_counter() - t0
    assert [r.text for r in res] == [
        f"echo: spread {i}" for i in range(8)
    ]  # order kept across servers
    assert _answered(a, "spread") + _answered(b, "spread") == 8
    assert min(_answered(a, "spread"), _answered(b, "spread")) >= 2
    assert a.max_inflight == b.max_inflight == 2
    assert elapsed < 4 * 0.2  # 8 requests, 4 at a time: two rounds, not four
    backend.close()


def test_a_slow_replica_gets_less_work(replicas):
    fast, slow = replicas
    fast.delay_s, slow.delay_s = 0.01, 0.4
    backend = make_backend(_target([slow.base_url, fast.base_url], batch_size=1))
    res = backend.generate([_req(f"k{i}", f"load {i}") for i in range(12)])
    assert all(r.status == "ok" for r in res)
    assert _answered(fast, "load") + _answered(slow, "load") == 12
    assert _answered(slow, "load") <= 2 < 10 <= _answered(fast, "load")
    backend.close()


def test_a_dead_replica_fails_over_and_all_failing_names_each(replicas):
    alive, dying = replicas
    backend = make_backend(
        _target([dying.base_url, alive.base_url], batch_size=1, options={"max_retries": 0})
    )
    dying.close()  # it answered the model list, then went away
    res = backend.generate([_req(f"k{i}", f"failover {i}") for i in range(6)])
    assert [r.status for r in res] == ["ok"] * 6
    assert _answered(alive, "failover") == 6
    assert _answered(dying, "failover") == 0
    # every replica failing: one error result naming each server's failure
    alive.fail_next = 10
    (r,) = backend.generate([_req("x", "nobody answers")])
    assert r.status == "error" and r.error.startswith("all 2 servers failed: ")
    assert alive.base_url in r.error and dying.base_url in r.error and "HTTP 500" in r.error
    alive.fail_next = 0
    # a 4xx is the request's fault: not retried elsewhere
    (r,) = backend.generate([_req("y", "BAD_REQUEST again")])
    assert r.status == "error" and "400" in r.error and not r.error.startswith("all ")
    assert _answered(alive, "BAD_REQUEST again") == 1
    backend.close()


def test_replicas_checked_at_start_and_mixed_revisions_shown(replicas, caplog):
    a, b = replicas
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    with pytest.raises(BackendError, match=r"server 2 of 2\).*remove it from `base_url:`"):
        make_backend(_target([a.base_url, dead]))
    b.snapshot = "echo-model-2025-06-01"
    backend = make_backend(_target([a.base_url, b.base_url], batch_size=1))
    assert backend.model_revision == SERVED_ID
    with caplog.at_level("WARNING"):
        res = backend.generate([_req(f"k{i}", f"rev {i}") for i in range(6)])
    # each result carries the revision of the replica that answered it, never the mix
    for i, r in enumerate(res):
        (answered,) = [s for s in (a, b) if s.posts_for(f"rev {i}")]
        assert r.model_revision == f"{answered.snapshot}@fp_test"
    assert {r.model_revision for r in res} == {
        f"{SNAPSHOT_ID}@fp_test",
        "echo-model-2025-06-01@fp_test",
    }
    # the backend as a whole (what a judge's rows name) lists both
    assert backend.model_revision == f"{SNAPSHOT_ID}@fp_test|echo-model-2025-06-01@fp_test"
    assert caplog.text.count("report different models") == 1
    backend.close()


def test_revision_falls_back_to_what_the_replica_lists():
    """A reply without `model` is answered by what the replica's model listing says it serves."""
    quiet = FakeOpenAIServer(
        snapshot=None, root="/models/echo-7b"
    )  # vLLM lists the checkpoint as `root`
    plain = FakeOpenAIServer(snapshot="echo-model-2025-06-01")
    plain.fingerprint = None
    try:
        backend = make_backend(_target([quiet.base_url, plain.base_url], batch_size=1))
        assert backend.model_revision == f"/models/echo-7b|{SERVED_ID}"  # listed, before any reply
        res = backend.generate([_req(f"k{i}", f"listed {i}") for i in range(6)])
        for i, r in enumerate(res):
            expected = (
                "/models/echo-7b" if quiet.posts_for(f"listed {i}") else "echo-model-2025-06-01"
            )
            assert r.model_revision == expected
        assert quiet.posts_for("listed") and plain.posts_for("listed")
        # a server whose list is not read: the configured name
        unlisted = make_backend(_target(quiet.base_url, options={"check_server": False}))
        (r,) = unlisted.generate([_req("u", "unlisted")])
        assert r.model_revision == SERVED_ID == unlisted.model_revision
        # an error result names no revision: nothing answered it
        (e,) = backend.generate([_req("bad", "BAD_REQUEST")])
        assert e.status == "error" and e.model_revision is None
        backend.close()
        unlisted.close()
    finally:
        quiet.close()
        plain.close()


def test_stream_yields_in_completion_order_and_keeps_requests_in_flight(server):
    from ableaudit.backends.base import results_in_batches

    server.delay_s = 0.05
    b = make_backend(_target(server.base_url, batch_size=2))
    reqs = [_req("slow", "SLOW one")] + [_req(f"f{i}", f"fast {i}") for i in range(6)]
    batches = list(results_in_batches(b, reqs, 2))
    keys = [r.key for batch in batches for r in batch]
    assert sorted(keys) == sorted(r.key for r in reqs) and [len(x) for x in batches] == [2, 2, 2, 1]
    # one slot stayed on the slow request while the other served all six fast ones (in batches
    # of generate calls, the slow answer would have come back in the first batch, holding f0)
    assert keys[-1] == "slow" and server.max_inflight == 2
    b.close()
    # closing the stream early cancels what has not started: one request in flight, so the first
    # answer and at most the one its worker took up next (the other six are never sent)
    server.delay_s = 0.1
    one = make_backend(_target(server.base_url, batch_size=1))
    stream = one.stream([_req(f"c{i}", f"cancel me {i}") for i in range(8)])
    next(stream)
    stream.close()
    assert server.posts_for("cancel me") <= 2
    one.close()


def test_results_in_batches_over_generate_keeps_order_and_can_fail_a_batch():
    from ableaudit.backends.base import Backend, results_in_batches
    from ableaudit.records import GenerationResult

    class Flaky(Backend):
        name = "flaky"
        model_revision = "flaky@1"
        concurrency = 2

        def generate(self, requests):
            if any("boom" in r.messages[-1]["content"] for r in requests):
                raise RuntimeError("device lost")
            return [GenerationResult.from_text(r.key, "ok") for r in requests]

        def close(self):
            pass

    reqs = [_req(f"k{i}", "boom" if i == 3 else "fine") for i in range(5)]
    got = list(results_in_batches(Flaky(), reqs, 2, fail_batch=True))
    assert [[r.key for r in batch] for batch in got] == [["k0", "k1"], ["k2", "k3"], ["k4"]]
    assert [r.status for r in got[1]] == ["error", "error"] and "device lost" in got[1][0].error
    with pytest.raises(RuntimeError, match="device lost"):
        list(results_in_batches(Flaky(), reqs, 2))

    class Short(Flaky):
        def generate(self, requests):
            return super().generate(requests)[:-1]

    with pytest.raises(RuntimeError, match="returned 1 results for 2 requests"):
        list(results_in_batches(Short(), reqs[:2], 2))

    class Stranger(Flaky):
        supports_stream = True

        def stream(self, requests):
            yield GenerationResult.from_text("not-asked", "ok")

    with pytest.raises(RuntimeError, match="keys it was not asked for: \\['not-asked'\\]"):
        list(results_in_batches(Stranger(), reqs[:2], 2))

    # streaming is declared, not discovered: a stream method alone changes nothing
    class Undeclared(Stranger):
        supports_stream = False

    assert [r.key for batch in results_in_batches(Undeclared(), reqs[:2], 2) for r in batch] == [
        "k0",
        "k1",
    ]
    with pytest.raises(NotImplementedError, match="does not stream"):
        next(Flaky().stream(reqs[:1]))


@pytest.mark.parametrize(
    "base_url, message",
    [
        (["http://a:1/v1", "http://a:1/v1"], "lists a server twice"),
        ([], "non-empty list"),
    ],
)
def test_bad_server_lists_are_config_errors(base_url, message):
    with pytest.raises(ValueError, match=message):
        Target(name="t", backend="openai", model="m", base_url=base_url)
    with pytest.raises(ValueError, match="base_url is for backend openai"):
        Target(
            name="t",
            backend="llamacpp",
            model="builtin:smollm2",
            base_url="http://127.0.0.1:8000/v1",
        )


def test_structured_output_is_sent_as_response_format(server):
    from ableaudit.judges.schemas import decoding_schema

    b = make_backend(_target(server.base_url))
    schema = decoding_schema("contrastive")
    res = b.generate(
        [_req("s", "judge this pair", json_schema=schema), _req("f", "free text please")]
    )
    assert [r.status for r in res] == ["ok", "ok"]
    p = next(p for p in server.payloads if "judge this pair" in json.dumps(p))
    assert p["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": schema, "strict": False},
    }
    assert "response_format" not in next(
        p for p in server.payloads if "free text please" in json.dumps(p)
    )
    b.close()


def test_null_content_is_an_error_and_an_empty_string_stays_empty(server):
    """A reply whose content is null (no refusal either) is a server fault: an error, retried next
    run; an empty string is the model's answer."""
    b = make_backend(_target(server.base_url, batch_size=1))
    server.null_content_next = 1
    (null,) = b.generate([_req("a", "hello")])
    assert null.status == "error"
    assert null.error.startswith("no content: ") and server.base_url in null.error
    (ok,) = b.generate([_req("a", "hello")])
    assert ok.status == "ok" and ok.text == "echo: hello"
    (empty,) = b.generate([_req("b", "hello", max_new_tokens=0)])
    assert empty.status == "empty"


def test_credentials_in_a_base_url_reach_the_server_but_no_message(server):
    """The URL is used as written; errors and messages name it without its userinfo."""
    secret = "canary-" + "x9Q2" * 4
    url = server.base_url.replace("http://", f"http://user:{secret}@")
    dead = "http://user:" + secret + "@127.0.0.1:9/v1"
    b = make_backend(_target([url, dead], batch_size=1, options={"check_server": False}))
    assert b.servers[0].url == url
    (res,) = b.generate([_req("a", "hello")])
    assert res.status == "ok"
    assert all(secret not in s.where for s in b.servers)
    with pytest.raises(BackendError) as err:
        make_backend(
            _target("http://user:" + secret + "@127.0.0.1:9/v1", options={"max_retries": 0})
        )
    assert secret not in str(err.value) and "127.0.0.1:9" in str(err.value)
