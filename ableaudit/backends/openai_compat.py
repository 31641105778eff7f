"""OpenAI-compatible HTTP backend: ``vllm serve``, ``llama-server``, hosted APIs.

Where the server is: ``target.base_url``, else env ``OPENAI_BASE_URL``, else
the OpenAI API. The key comes from the env var named by ``target.api_key_env``
(default ``OPENAI_API_KEY``); local servers get ``"EMPTY"`` when it is unset,
since vLLM and llama.cpp accept any key unless started with one.

Several servers: ``base_url`` may list replicas of one model (e.g. one
``vllm serve`` per GPU). Each request goes to the replica with the fewest
requests in flight, so a slow replica gets less work; ``batch_size`` requests
run at once per replica. A request whose replica cannot be reached, times out
or keeps answering 5xx after its retries moves to the next replica (the
failed one is tried last from then on, until it answers again); only when
every replica failed does it become an error result, naming each failure.

Retries: the ``openai`` client's own ``max_retries`` (exponential backoff with
jitter, 0.5 s doubling to 8 s, honouring ``Retry-After``) on connection errors,
timeouts, 408/409/429 and 5xx. A request still failing after that, or failing
with a 4xx (e.g. prompt longer than the context), becomes an error result; the
rest of the batch goes on. Requests run concurrently on a thread pool of
``target.batch_size`` workers per server; the server does the batching. The
audit and the judges use ``stream``: requests stay in flight continuously and
results land in the order they complete.

In-flight window: ``stream`` has at most ``window`` requests outstanding (sent,
or waiting for a worker, and not yet handed to the consumer); the next one is
sent only when the consumer comes back for another result, so a consumer that
lands before pulling again sets the pace. A kill therefore loses at most
``window + size - 1`` answers when the consumer lands batches of ``size``
(``results_in_batches``). A reply that is not a well-formed chat completion (bad
JSON, no choices, no message) is an error result named ``malformed reply``;
token counts that are not non-negative integers land as null, with a warning.

On construction the backend lists each server's models (``GET /models``) once:
this fails fast on an unreachable server or a bad key, and tells us each
replica's listed revision (the listing's ``root`` where the server gives one,
as vLLM does: the checkpoint behind a served name; else the served id). Each
result's ``model_revision`` is what answered that request: the ``model`` the
replica reported in its reply (hosted APIs resolve aliases such as ``gpt-4o``
to a dated snapshot there), plus ``system_fingerprint`` when given, else that
replica's listed revision. Replicas reporting different revisions get a
warning (each row still says which answered it); the backend's own
``model_revision`` then lists all of them, sorted and joined by ``|``.

Images in ``request.images`` are sent as ``image_url`` parts with base64 data
URLs on the last user message (the OpenAI vision format; vLLM accepts it too).

options (``target.options``):
  max_retries: client retries per request (default 4)
  timeout_s: per-attempt timeout in seconds (default 600)
  check_server: list models on construction (default true)
  max_tokens_field: "max_tokens" (default) or "max_completion_tokens" (newer OpenAI models need it)
  send_seed: send request.seed (default true; some hosted APIs reject it)
  extra_body: dict merged into every request body (e.g. {"top_k": -1} for vLLM)
  window: requests outstanding in ``stream`` at most (default ``concurrency``: batch_size x servers)
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ableaudit import redaction
from ableaudit.keys import strip_url_credentials

from ._common import (
    basic_auth_header,
    is_local_url,
    normalize_finish_reason,
    openai_messages,
)
from .base import (
    Backend,
    BackendError,
    GenerationCancelled,
    GenerationRequest,
    GenerationResult,
    Stopwatch,
    response_format,
)

if TYPE_CHECKING:
    from ..target import Target

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Server:
    """One replica: its client, how busy and how healthy it is, and what it serves (guarded by the backend's lock)."""

    url: str | None
    """The server's base URL; None for OPENAI_BASE_URL unset (the OpenAI API)."""
    client: Any
    """Its ``openai.OpenAI`` client."""
    inflight: int = 0
    """Requests sent and not yet answered."""
    served: int = 0
    """Requests it answered."""
    failing: bool = False
    """Its last request failed: it is tried last until it answers again."""
    listed: str | None = None
    """The revision its model listing gives (``root``, else the id); None when not listed."""
    reported: str | None = None
    """The revision its latest reply reported; None before any."""

    @property
    def where(self) -> str:
        """The server as messages and logs name it: its URL without credentials."""
        return strip_url_credentials(self.url) if self.url else "the OpenAI API"


class OpenAIBackend(Backend):
    name = "openai"
    supports_stream = True
    supports_json_schema = True
    json_schema_by_default = (
        False  # not every OpenAI-compatible server has response_format (vLLM's does)
    )
    supports_images = True

    def __init__(self, target: Target, adapter: str | None = None) -> None:
        if adapter or target.adapter:
            raise BackendError(
                "the openai backend cannot apply a peft adapter on the client side; serve it "
                "(e.g. `vllm serve --enable-lora --lora-modules name=path`) and set `model:` to its name"
            )
        try:
            import openai
        except ImportError as e:  # pragma: no cover
            raise BackendError(f"the openai backend needs the openai package ({e})") from None
        self._openai = openai
        opts = dict(target.options or {})
        self.model = target.model
        self.batch_size = int(target.batch_size)
        urls = target.base_urls or [os.environ.get("OPENAI_BASE_URL") or None]
        redaction.remember_env(target.api_key_env)
        for u in urls:
            redaction.remember_url(u)
        key = os.environ.get(target.api_key_env)
        if not key:
            remote = [
                strip_url_credentials(u) if u else "the OpenAI API"
                for u in urls
                if u is None or not is_local_url(u)
            ]
            if remote:
                raise BackendError(
                    f"no API key: env var {target.api_key_env} is unset for {', '.join(remote)}; "
                    f"export {target.api_key_env}=... or set `api_key_env:` in target {target.name!r}"
                )
            key = "EMPTY"
        self.max_tokens_field = opts.get("max_tokens_field", "max_tokens")
        self.send_seed = bool(opts.get("send_seed", True))
        self.extra_body = dict(opts.get("extra_body") or {})
        self.servers = [_Server(u, self._client(u, key, opts)) for u in urls]
        self.concurrency = self.batch_size * len(self.servers)
        self.window = _positive_int(opts.get("window", self.concurrency), "window", target.name)
        self._lock = threading.Lock()
        self._warned_mixed = False
        self._warned_usage = False
        if opts.get("check_server", True):
            for i, server in enumerate(self.servers):
                self._check_server(
                    server,
                    f" (server {i + 1} of {len(self.servers)})" if len(self.servers) > 1 else "",
                )

    def _client(self, url: str | None, key: str, opts: dict[str, Any]) -> Any:
        """The client of one server; credentials in its URL go as the header they stand for, so
        the URL the HTTP client logs carries none."""
        auth = basic_auth_header(url) if url else None
        return self._openai.OpenAI(
            base_url=strip_url_credentials(url) if auth else url,
            api_key=key,
            max_retries=int(opts.get("max_retries", 4)),
            timeout=float(opts.get("timeout_s", 600)),
            default_headers={"Authorization": auth} if auth else None,
        )

    @property
    def model_revision(self) -> str:
        """The served model as the replicas report it ('|'-joined when they differ); before any reply, as they
        list it; the configured name when they do neither. A result carries the revision that answered it."""
        with self._lock:
            revs = sorted({s.reported for s in self.servers if s.reported}) or sorted(
                {s.listed for s in self.servers if s.listed}
            )
        return "|".join(revs) if revs else self.model

    def _check_server(self, server: _Server, which: str) -> None:
        where = server.where + which
        fix = " or remove it from `base_url:`" if which else ""
        try:
            models = server.client.with_options(max_retries=1, timeout=10.0).models.list()
            ids = [m.id for m in models.data]
            served = next((m for m in models.data if m.id == self.model), None)
        except self._openai.APIConnectionError as e:
            raise BackendError(
                f"cannot reach {where}: {e}. Start the server (e.g. `vllm serve {self.model}`), "
                f"fix `base_url:` / OPENAI_BASE_URL{fix}",
                transient=True,
            ) from None
        except self._openai.AuthenticationError as e:
            raise BackendError(
                f"{where} rejected the API key ({e}); check the env var the target's `api_key_env` names"
            ) from None
        except self._openai.APIStatusError:
            return  # some servers have no /models; the chat calls will tell
        if ids and self.model not in ids:
            raise BackendError(
                f"{where} does not serve model {self.model!r}; it serves {ids[:20]}. Fix `model:`{fix}"
            )
        if served is not None:
            # vLLM lists the checkpoint behind a served name as `root`; others list the id alone
            root = (served.model_extra or {}).get("root")
            with self._lock:
                server.listed = str(root) if root else served.id

    def _body(self, req: GenerationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(req),
            "temperature": max(0.0, float(req.temperature)),
            "top_p": float(req.top_p),
            self.max_tokens_field: int(req.max_new_tokens),
        }
        if self.send_seed and req.seed is not None:
            body["seed"] = int(req.seed)
        if req.json_schema is not None:
            body["response_format"] = response_format(req.json_schema)
        return body

    def _acquire(self, tried: list[_Server]) -> _Server | None:
        """The least busy replica not tried yet for this request; failing replicas come last."""
        with self._lock:
            left = [s for s in self.servers if s not in tried]
            if not left:
                return None
            server = min(left, key=lambda s: (s.failing, s.inflight, s.served))
            server.inflight += 1
            return server

    def _release(self, server: _Server, ok: bool) -> None:
        with self._lock:
            server.inflight -= 1
            server.served += ok
            server.failing = not ok

    def _one(self, req: GenerationRequest) -> GenerationResult:
        sw = Stopwatch()
        try:
            body = self._body(req)
        except Exception as e:  # e.g. an image that is not PNG/JPEG/GIF/WebP: never sent
            return GenerationResult.failed(req.key, e, latency_ms=sw.ms())
        tried: list[_Server] = []
        failures: list[str] = []
        while (server := self._acquire(tried)) is not None:
            tried.append(server)
            try:
                resp = server.client.chat.completions.create(
                    **body, extra_body=self.extra_body or None
                )
            except (self._openai.APIConnectionError, self._openai.InternalServerError) as e:
                # the replica is down, too slow or broken: the next one may answer
                self._release(server, ok=False)
                failures.append(_describe(e))
                continue
            except self._openai.APIStatusError as e:
                # the request's own fault (4xx): no other replica would answer it
                self._release(server, ok=True)
                return GenerationResult.failed(req.key, _describe(e), latency_ms=sw.ms())
            except ValueError as e:  # a body that is not JSON (json.JSONDecodeError)
                self._release(server, ok=True)
                return _malformed(req, server, e, sw.ms())
            except Exception as e:
                self._release(server, ok=True)
                return GenerationResult.failed(req.key, e, latency_ms=sw.ms())
            self._release(server, ok=True)
            try:
                return self._result(req, server, resp, sw.ms())
            except (AttributeError, TypeError, ValueError, IndexError) as e:
                # JSON, but not a chat completion (a choice without a message, say)
                return _malformed(req, server, e, sw.ms())
        if len(tried) == 1:
            return GenerationResult.failed(req.key, failures[0], latency_ms=sw.ms())
        detail = "; ".join(f"{s.where}: {f}" for s, f in zip(tried, failures))
        return GenerationResult.failed(
            req.key, f"all {len(tried)} servers failed: {detail}", latency_ms=sw.ms()
        )

    def _result(
        self, req: GenerationRequest, server: _Server, resp: Any, ms: float
    ) -> GenerationResult:
        if not resp.choices:
            return GenerationResult.failed(
                req.key, f"malformed reply: {server.where} sent no choices", latency_ms=ms
            )
        choice = resp.choices[0]
        content = choice.message.content
        if content is not None and not isinstance(content, str):
            raise TypeError(f"message content is {type(content).__name__}, not text")
        if content is None and not getattr(choice.message, "refusal", None):
            # no text and no refusal: a server fault, not an empty answer; retried next run
            return GenerationResult.failed(
                req.key,
                f"no content: {server.where} returned a null message content "
                f"(finish_reason {choice.finish_reason!r})",
                latency_ms=ms,
            )
        served = getattr(resp, "model", None)
        fp = getattr(resp, "system_fingerprint", None)
        reported = (f"{served}@{fp}" if fp else served) if served else None
        with self._lock:
            if reported:
                server.reported = reported
            revision = reported or server.listed or self.model
            answered = {s.reported for s in self.servers if s.reported}
            mixed = len(answered) > 1 and not self._warned_mixed
            self._warned_mixed |= mixed
        if mixed:
            log.warning(
                "the servers of %s report different models: %s; check that every replica serves "
                "the same checkpoint (each row says which answered it)",
                self.model,
                " | ".join(sorted(answered)),
            )
        tokens = self._usage(server, getattr(resp, "usage", None))
        return GenerationResult.from_text(
            req.key,
            content or "",
            finish_reason=normalize_finish_reason(choice.finish_reason),
            prompt_tokens=tokens["prompt_tokens"],
            completion_tokens=tokens["completion_tokens"],
            latency_ms=ms,
            model_revision=revision,
        )

    def _usage(self, server: _Server, usage: Any) -> dict[str, int | None]:
        """The reply's token counts; one that is missing or not a non-negative integer is None
        (the answer still lands), and the first such reply of a backend is logged."""
        counts: dict[str, int | None] = {}
        odd = []
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(usage, name, None)
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            counts[name] = value if ok else None
            if value is not None and not ok:
                odd.append(f"{name}={value!r}")
        if odd:
            with self._lock:
                warn = not self._warned_usage
                self._warned_usage = True
            if warn:
                log.warning(
                    "%s sent token counts that are not non-negative integers (%s); they land as "
                    "null (the answers land as usual)",
                    server.where,
                    ", ".join(odd),
                )
        return counts

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        if len(requests) <= 1 or self.concurrency == 1:
            return [self._one(r) for r in requests]
        with ThreadPoolExecutor(min(self.concurrency, len(requests))) as pool:
            return list(pool.map(self._one, requests))

    def stream(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """Results as they complete, with at most ``window`` requests outstanding.

        Unlike batches of ``generate``, no request waits for the slowest of its
        batch before the next one starts: the servers stay busy and a fast
        replica takes more. The next request is sent when the consumer comes
        back for another result (having landed the last one), never ahead of
        it, so a slow consumer holds back the sending instead of piling up
        answers a kill would lose. Closing the iterator early cancels what has
        not started.
        """
        if not requests:
            return
        waiting = iter(requests)
        pool = ThreadPoolExecutor(min(self.concurrency, self.window, len(requests)))
        outstanding: set[Future[GenerationResult]] = set()
        stop = self.cancel_future

        def send(n: int) -> None:
            if self.cancelled:  # cancel(): nothing more is sent
                return
            for req in itertools.islice(waiting, n):
                outstanding.add(pool.submit(self._one, req))

        try:
            send(self.window)
            while outstanding:
                done, _ = wait(outstanding | {stop}, return_when=FIRST_COMPLETED)
                if stop in done:  # cancel(): the replies in flight are not waited for
                    raise GenerationCancelled([f.result() for f in done if f is not stop])
                for future in done:
                    outstanding.discard(future)
                    yield future.result()
                    send(1)  # the consumer is back: the answer just handed out is its own
        finally:
            pool.shutdown(wait=not self.cancelled, cancel_futures=True)

    def close(self) -> None:
        for server in self.servers:
            server.client.close()


def _malformed(
    req: GenerationRequest, server: _Server, e: Exception, ms: float
) -> GenerationResult:
    """An error result for a reply that is not a chat completion; the next run asks again."""
    return GenerationResult.failed(
        req.key, f"malformed reply: {server.where} sent {type(e).__name__}: {e}", latency_ms=ms
    )


def _positive_int(value: Any, name: str, target: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BackendError(
            f"target {target!r}: option {name} must be a whole number of at least 1, got {value!r}; "
            f"fix `options: {{{name}: ...}}` or remove it (default: batch_size x servers)"
        )
    return value


def _describe(e: Exception) -> str:
    status = getattr(e, "status_code", None)
    return f"HTTP {status}: {getattr(e, 'message', e)}" if status is not None else str(e)
