"""OpenAI-compatible HTTP backend: ``vllm serve``, ``llama-server``, hosted APIs.

Where the server is: ``target.base_url``, else env ``OPENAI_BASE_URL``, else
the OpenAI API. The key comes from the env var named by ``target.api_key_env``
(default ``OPENAI_API_KEY``); local servers get ``"EMPTY"`` when it is unset,
since vLLM and llama.cpp accept any key unless started with one.

Retries: the ``openai`` client's own ``max_retries`` (exponential backoff with
jitter, 0.5 s doubling to 8 s, honouring ``Retry-After``) on connection errors,
timeouts, 408/409/429 and 5xx. A request still failing after that, or failing
with a 4xx (e.g. prompt longer than the context), becomes an error result; the
rest of the batch goes on. Requests run concurrently on a thread pool of
``target.batch_size`` workers, the server does the batching.

On construction the backend lists the server's models (``GET /models``) once:
this fails fast on an unreachable server or a bad key, and tells us the served
id. ``model_revision`` is the served model id, updated to the ``model`` the
server reports in its replies (hosted APIs resolve aliases such as ``gpt-4o``
to a dated snapshot there), plus ``system_fingerprint`` when given.

Images in ``request.images`` are sent as ``image_url`` parts with base64 data
URLs on the last user message (the OpenAI vision format; vLLM accepts it too).

options (``target.options``):
  max_retries: client retries per request (default 4)
  timeout_s: per-attempt timeout in seconds (default 600)
  check_server: list models on construction (default true)
  max_tokens_field: "max_tokens" (default) or "max_completion_tokens" (newer OpenAI models need it)
  send_seed: send request.seed (default true; some hosted APIs reject it)
  extra_body: dict merged into every request body (e.g. {"top_k": -1} for vLLM)
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Sequence

from ._common import is_local_url, normalize_finish_reason, openai_messages
from .base import BackendError, GenerationRequest, GenerationResult, Stopwatch, response_format

if TYPE_CHECKING:
    from ..config import Target


class OpenAIBackend:
    name = "openai"

    def __init__(self, target: "Target", adapter: str | None = None) -> None:
        if adapter or target.adapter:
            raise BackendError("the openai backend cannot apply a peft adapter on the client side; serve it "
                               "(e.g. `vllm serve --enable-lora --lora-modules name=path`) and set `model:` to its name")
        try:
            import openai
        except ImportError as e:  # pragma: no cover
            raise BackendError(f"the openai backend needs the openai package ({e})") from None
        self._openai = openai
        opts = dict(target.options or {})
        self.model = target.model
        self.batch_size = int(target.batch_size)
        self.base_url = target.base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = os.environ.get(target.api_key_env)
        if not key:
            if self.base_url is None or not is_local_url(self.base_url):
                raise BackendError(f"no API key: env var {target.api_key_env} is unset for {self.base_url or 'the OpenAI API'}; "
                                   f"export {target.api_key_env}=... or set `api_key_env:` in target {target.name!r}")
            key = "EMPTY"
        self.max_tokens_field = opts.get("max_tokens_field", "max_tokens")
        self.send_seed = bool(opts.get("send_seed", True))
        self.extra_body = dict(opts.get("extra_body") or {})
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key,
                                    max_retries=int(opts.get("max_retries", 4)),
                                    timeout=float(opts.get("timeout_s", 600)))
        self._lock = threading.Lock()
        self.model_revision: str | None = self.model
        if opts.get("check_server", True):
            self._check_server()

    def _check_server(self) -> None:
        where = self.base_url or "the OpenAI API"
        try:
            models = self.client.with_options(max_retries=1, timeout=10.0).models.list()
            ids = [m.id for m in models.data]
        except self._openai.APIConnectionError as e:
            raise BackendError(f"cannot reach {where}: {e}. Start the server (e.g. `vllm serve {self.model}`) "
                               "or fix `base_url:` / OPENAI_BASE_URL") from None
        except self._openai.AuthenticationError as e:
            raise BackendError(f"{where} rejected the API key ({e}); check the env var the target's `api_key_env` names") from None
        except self._openai.APIStatusError:
            return  # some servers have no /models; the chat calls will tell
        if ids and self.model not in ids:
            raise BackendError(f"{where} does not serve model {self.model!r}; it serves {ids[:20]}. Fix `model:`")

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

    def _one(self, req: GenerationRequest) -> GenerationResult:
        sw = Stopwatch()
        try:
            resp = self.client.chat.completions.create(**self._body(req), extra_body=self.extra_body or None)
        except self._openai.APIStatusError as e:
            return GenerationResult.failed(req.key, f"HTTP {e.status_code}: {e.message}", latency_ms=sw.ms())
        except Exception as e:
            return GenerationResult.failed(req.key, e, latency_ms=sw.ms())
        ms = sw.ms()
        if not resp.choices:
            return GenerationResult.failed(req.key, "server reply has no choices", latency_ms=ms)
        choice = resp.choices[0]
        served = getattr(resp, "model", None)
        if served:
            fp = getattr(resp, "system_fingerprint", None)
            rev = f"{served}@{fp}" if fp else served
            with self._lock:
                self.model_revision = rev
        usage = resp.usage
        return GenerationResult.from_text(
            req.key, choice.message.content or "", finish_reason=normalize_finish_reason(choice.finish_reason),
            prompt_tokens=getattr(usage, "prompt_tokens", None), completion_tokens=getattr(usage, "completion_tokens", None),
            latency_ms=ms)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        if len(requests) <= 1 or self.batch_size == 1:
            return [self._one(r) for r in requests]
        with ThreadPoolExecutor(min(self.batch_size, len(requests))) as pool:
            return list(pool.map(self._one, requests))

    def close(self) -> None:
        self.client.close()
