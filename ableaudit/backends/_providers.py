"""The built-in backends, registered by name; each module is imported when a target first needs it."""

from __future__ import annotations

from .base import Backend
from .registry import backend

LOCAL_STACK = (
    "install requirements.lock (torch, transformers, peft), or use backend llamacpp or openai"
)


@backend("transformers", tasks=("text",), requires=("torch", "transformers"), install=LOCAL_STACK)
def transformers() -> type[Backend]:
    from .transformers_backend import TransformersBackend

    return TransformersBackend


@backend("transformers", tasks=("vision",), requires=("torch", "transformers"), install=LOCAL_STACK)
def transformers_vision() -> type[Backend]:
    from .transformers_vlm import TransformersVLMBackend

    return TransformersVLMBackend


@backend("llamacpp", requires=("xllamacpp",), install="install xllamacpp (pip install xllamacpp)")
def llamacpp() -> type[Backend]:
    from .llamacpp import LlamaCppBackend

    return LlamaCppBackend


@backend(
    "openai",
    tasks=("text", "vision"),
    requires=("openai",),
    install="install openai (pip install openai)",
)
def openai() -> type[Backend]:
    from .openai_compat import OpenAIBackend

    return OpenAIBackend


@backend("vllm")
def vllm() -> type[Backend]:
    # vLLM itself runs in the worker's own venv (ABLEAUDIT_VLLM_PYTHON); the backend checks that on start
    from .vllm_backend import VllmBackend

    return VllmBackend
