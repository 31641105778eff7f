"""Backends by name: each registers a loader with ``@backend``, and ``make_backend`` looks the name up.

A loader imports its backend's module only when a target asks for it, so the
openai and vllm backends start without torch, and ``python -m
ableaudit.backends.vllm_worker`` (which runs in a venv holding none of the
audit's dependencies) imports nothing but this standard-library module on the
way. Before a backend starts, the packages it needs are looked up (never
imported) so a missing one fails with the command that installs it.

A name is registered per task: a vision target (``task: vision``) runs on the
entries registered for ``vision``, whose class must declare ``supports_images``.
Config validation reads the names from here.
"""

from __future__ import annotations

import importlib.util
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .base import Backend, BackendError, GenerationRequest

if TYPE_CHECKING:
    from ..target import Target

TASKS = ("text", "vision")

Loader = Callable[[], type[Backend]]
OptionType = type | tuple[type, ...]


@dataclass(frozen=True)
class BackendEntry:
    """One backend registered for one target task."""

    name: str
    """What a target's ``backend:`` says."""
    task: str
    """The target task this entry serves: 'text' | 'vision'."""
    requires: tuple[str, ...]
    """Import names of the packages the backend needs when it starts."""
    install: str
    """How to install them (said when one is missing)."""
    loader: Loader
    """Imports the backend's module and returns its class."""
    options: Mapping[str, OptionType] | None = field(default=None)
    """The keys a target's ``options:`` may hold, each with the type its value must have; None:
    not declared (any key passes)."""

    def load(self) -> type[Backend]:
        """The backend class, checked against its registration (a mismatch is a bug in the backend module)."""
        cls = self.loader()
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError(
                f"the loader of backend {self.name!r} returned {cls!r}, not a Backend subclass"
            )
        if cls.name != self.name:
            raise TypeError(
                f"backend {self.name!r} loads {cls.__name__}, whose name is {cls.name!r}"
            )
        if self.task == "vision" and not cls.supports_images:
            raise TypeError(
                f"backend {self.name!r} is registered for task vision but {cls.__name__} "
                "does not declare supports_images"
            )
        return cls

    def check_requirements(self) -> None:
        """Raise BackendError naming the fix when a package the backend needs is not installed."""
        missing = [p for p in self.requires if importlib.util.find_spec(p) is None]
        if missing:
            raise BackendError(
                f"backend {self.name} needs {', '.join(missing)}, which is not installed; "
                f"{self.install}"
            )


_REGISTRY: dict[tuple[str, str], BackendEntry] = {}


def backend(
    name: str,
    *,
    tasks: tuple[str, ...] = ("text",),
    requires: tuple[str, ...] = (),
    install: str = "",
    options: Mapping[str, OptionType] | None = None,
) -> Callable[[Loader], Loader]:
    """Register the decorated loader as backend ``name`` for ``tasks``.

    The loader imports the backend's module and returns its class; it runs
    when a target first needs the class, so registering costs no import.
    ``options`` declares the keys of a target's ``options:`` the backend reads
    (with their value types), so the config check names a misspelt one.
    """
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise ValueError(f"backend {name!r}: tasks must be some of {TASKS}, got {tasks}")

    def register(loader: Loader) -> Loader:
        for task in tasks:
            if (name, task) in _REGISTRY:
                raise ValueError(f"backend {name!r} is registered twice for task {task}")
            _REGISTRY[(name, task)] = BackendEntry(
                name,
                task,
                tuple(requires),
                install or f"install {', '.join(requires)}",
                loader,
                None if options is None else dict(options),
            )
        return loader

    return register


def backend_names(task: str | None = None) -> tuple[str, ...]:
    """The registered names, sorted; ``task``: only those that can serve targets of that task."""
    return tuple(sorted({n for n, t in _REGISTRY if task is None or t == task}))


def backend_entry(name: str, task: str = "text") -> BackendEntry:
    """The registry entry for a target's backend and task; BackendError naming the choices if there is none."""
    entry = _REGISTRY.get((name, task))
    if entry is not None:
        return entry
    if name not in backend_names():
        raise BackendError(
            f"unknown backend {name!r}; the registered backends are {', '.join(backend_names())}"
        )
    raise BackendError(
        f"backend {name!r} cannot serve task {task}; task {task} runs on backend "
        f"{' or '.join(backend_names(task))}"
    )


def backend_class(name: str, task: str = "text") -> type[Backend]:
    """The class of a registered backend (imports its module, not what it needs to run)."""
    return backend_entry(name, task).load()


def backends_where(capable: Callable[[type[Backend]], bool], task: str = "text") -> tuple[str, ...]:
    """The names of the backends for ``task`` whose class satisfies ``capable``, e.g. structured output."""
    return tuple(n for n in backend_names(task) if capable(backend_class(n, task)))


def make_backend(target: Target, adapter: str | None = None) -> Backend:
    """Build the backend a target names. ``adapter`` (an arm's peft adapter) overrides ``target.adapter``.

    Raises BackendError when the backend cannot be used at all (unknown name,
    a package it needs missing, missing model, unreachable server).
    """
    try:
        entry = backend_entry(target.backend, target.task)
        entry.check_requirements()
    except BackendError as err:
        raise BackendError(f"target {target.name!r}: {err}") from None
    made = entry.load()(target, adapter)
    _LIVE.add(made)
    return made


# every backend make_backend built that is still referenced: what a stop request cancels
_LIVE: weakref.WeakSet[Backend] = weakref.WeakSet()


def cancel_backends() -> int:
    """Cancel every backend ``make_backend`` built that is still in use; returns how many.

    Safe in a signal handler: each ``cancel`` only sets a flag or drops queued work.
    """
    live = list(_LIVE)
    for b in live:
        b.cancel()
    return len(live)


def refuse_json_schema(req: GenerationRequest, backend: str) -> None:
    """Raise (failing that request) when a request asks for structured output this backend cannot give."""
    if req.json_schema is not None:
        able = backends_where(lambda cls: cls.supports_json_schema)
        raise ValueError(
            f"backend {backend} cannot constrain output to a JSON schema; structured output needs backend "
            f"{', '.join(able)} (or set the judge's structured_output: off)"
        )
