"""Inference backends behind one interface (``base.Backend``), found by name in a registry.

Each backend module is imported only when a target asks for it (see
``registry.py``): the openai and vllm backends must start without paying for
(or even having) torch, and ``python -m ableaudit.backends.vllm_worker`` runs
in a venv that has none of the audit's dependencies, so this package imports
nothing but the standard library at import time.
"""

from __future__ import annotations

from . import _providers  # noqa: F401  (registers the built-in backends)
from .base import Backend, BackendError, GenerationRequest, GenerationResult
from .registry import backend, backend_class, backend_names, cancel_backends, make_backend

__all__ = [
    "Backend",
    "BackendError",
    "GenerationRequest",
    "GenerationResult",
    "backend",
    "backend_class",
    "backend_names",
    "cancel_backends",
    "make_backend",
]
