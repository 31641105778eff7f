"""The built-in backends, registered by name; each module is imported when a target first needs it."""

from __future__ import annotations

from .base import Backend
from .registry import backend

LOCAL_STACK = (
    "install requirements.lock (torch, transformers, peft), or use backend llamacpp or openai"
)

# The keys each backend reads from a target's `options:` (see the backend module's docstring).
NUMBER = (int, float)
TRANSFORMERS_OPTIONS = {
    "device": str,
    "dtype": str,
    "attn_implementation": str,
    "trust_remote_code": bool,
    "chat_template": str,
    "merge_adapter": bool,
    "ignore_eos": bool,
}
LLAMACPP_OPTIONS = {
    "n_ctx": int,
    "n_threads": int,
    "n_parallel": int,
    "n_gpu_layers": int,
    "verbose": bool,
}
OPENAI_OPTIONS = {
    "max_retries": int,
    "timeout_s": NUMBER,
    "check_server": bool,
    "max_tokens_field": str,
    "send_seed": bool,
    "window": int,
    "extra_body": dict,
}
VLLM_OPTIONS = {
    "worker_cmd": (str, list),
    "worker_args": list,
    "timeout_s": NUMBER,
    "part_rows": int,
    "poll_s": NUMBER,
    "exchange_dir": str,
    "engine": str,
    "ray_address": str,
    "ray_concurrency": int,
    "ray_batch_size": int,
}


@backend(
    "transformers",
    tasks=("text",),
    requires=("torch", "transformers"),
    install=LOCAL_STACK,
    options=TRANSFORMERS_OPTIONS,
)
def transformers() -> type[Backend]:
    from .transformers_backend import TransformersBackend

    return TransformersBackend


@backend(
    "transformers",
    tasks=("vision",),
    requires=("torch", "transformers"),
    install=LOCAL_STACK,
    options={**TRANSFORMERS_OPTIONS, "image_processing": str},
)
def transformers_vision() -> type[Backend]:
    from .transformers_vlm import TransformersVLMBackend

    return TransformersVLMBackend


@backend(
    "llamacpp",
    requires=("xllamacpp",),
    install="install xllamacpp (pip install xllamacpp)",
    options=LLAMACPP_OPTIONS,
)
def llamacpp() -> type[Backend]:
    from .llamacpp import LlamaCppBackend

    return LlamaCppBackend


@backend(
    "openai",
    tasks=("text", "vision"),
    requires=("openai",),
    install="install openai (pip install openai)",
    options=OPENAI_OPTIONS,
)
def openai() -> type[Backend]:
    from .openai_compat import OpenAIBackend

    return OpenAIBackend


@backend("vllm", options=VLLM_OPTIONS)
def vllm() -> type[Backend]:
    # vLLM itself runs in the worker's own venv (ABLEAUDIT_VLLM_PYTHON); the backend checks that on start
    from .vllm_backend import VllmBackend

    return VllmBackend
