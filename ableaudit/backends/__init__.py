"""Inference backends behind one interface (see ``base.py``), built from a config ``Target``.

Each backend module is imported only when a target asks for it: the openai
and vllm backends must start without paying for (or even having) torch, and
``python -m ableaudit.backends.vllm_worker`` runs in a venv that has none of
the audit's dependencies, so this package imports nothing heavy at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Backend, BackendError, GenerationRequest, GenerationResult

if TYPE_CHECKING:
    from ..config import Target

__all__ = ["Backend", "BackendError", "GenerationRequest", "GenerationResult", "make_backend"]


def make_backend(target: "Target", adapter: str | None = None) -> Backend:
    """Build the backend a target names. ``adapter`` (an arm's peft adapter) overrides ``target.adapter``.

    Raises BackendError when the backend cannot be used at all (missing model,
    unreachable server, unknown backend name).
    """
    kind = target.backend
    if kind == "transformers" and getattr(target, "task", "text") == "vision":
        from .transformers_vlm import TransformersVLMBackend

        return TransformersVLMBackend(target, adapter)
    if kind == "transformers":
        from .transformers_backend import TransformersBackend

        return TransformersBackend(target, adapter)
    if kind == "llamacpp":
        from .llamacpp import LlamaCppBackend

        return LlamaCppBackend(target, adapter)
    if kind == "openai":
        from .openai_compat import OpenAIBackend

        return OpenAIBackend(target, adapter)
    if kind == "vllm":
        from .vllm_backend import VllmBackend

        return VllmBackend(target, adapter)
    raise BackendError(f"unknown backend {kind!r} for target {target.name!r}; use transformers, llamacpp, openai or vllm")
