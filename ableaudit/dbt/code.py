"""The code a module runs, read from its import statements: a digest for what a build reuses.

A result kept from an earlier build (a statistics group, an incremental model's rows) is
valid only while the code that computed it is the same. ``code_digest`` derives that code
from the module itself: every ``ableaudit`` module its ``import`` and ``from ... import``
statements name (anywhere in the file, a function's local import included), and theirs, with
the packages those modules are part of (``ableaudit/__init__.py``, ``ableaudit/stats/__init__.py``);
and, for every other package they import (numpy, scipy, duckdb, dbt, ...), the versions of the
installed distributions that provide it. Nothing is listed by hand: a new import is in the
digest as soon as it is written.

A module that loads code by a name computed at run time (``importlib.import_module(name)``)
is not followed; the package has none on the paths the digest serves (the dbt plugin's UDFs,
the statistics marts).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import platform
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from types import ModuleType

PACKAGE = "ableaudit"
_ROOT = Path(__file__).resolve().parents[1]
"""The folder of the ``ableaudit`` package this process imports."""


def module_file(name: str) -> Path | None:
    """The source file of ``ableaudit`` module ``name`` (a package: its ``__init__.py``), or
    None when no such module exists (``from ableaudit.stats import significance`` names a
    function, not a module)."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = _ROOT.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _module_name(path: Path) -> str | None:
    """The dotted name of a file of the package, or None for a file outside it."""
    try:
        relative = path.resolve().relative_to(_ROOT.parent)
    except ValueError:
        return None
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if parts and parts[0] == PACKAGE else None


@functools.lru_cache(maxsize=1024)
def _read(path: str, mtime_ns: int, size: int) -> tuple[str, frozenset[str]]:
    """A file's sha256 and the modules its import statements name (``from a import b``: ``a``
    and ``a.b``), relative imports resolved against the file's package."""
    source = Path(path).read_bytes()
    name = _module_name(Path(path))
    package = None
    if name:
        package = name if Path(path).name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if not package:
                    continue
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return hashlib.sha256(source).hexdigest(), frozenset(n for n in named if n)


def _file_facts(path: Path) -> tuple[str, frozenset[str]]:
    stat = path.stat()
    return _read(str(path), stat.st_mtime_ns, stat.st_size)


def closure(roots: Iterable[Path]) -> tuple[dict[str, str], set[str]]:
    """The code the files ``roots`` run: ({module name or root file: sha256 of its source}, the
    top-level names of the other packages imported). Each package a module is in counts as
    imported (Python runs its ``__init__`` first)."""
    sources: dict[str, str] = {}
    external: set[str] = set()
    pending: list[tuple[str, Path]] = [
        (_module_name(Path(p)) or f"<root {i}>", Path(p)) for i, p in enumerate(roots)
    ]
    while pending:
        key, path = pending.pop()
        if key in sources:
            continue
        digest, named = _file_facts(path)
        sources[key] = digest
        for name in named:
            top = name.split(".")[0]
            if top != PACKAGE:
                external.add(top)
                continue
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                module = ".".join(parts[:i])
                found = module_file(module)
                if found is not None and module not in sources:
                    pending.append((module, found))
    return sources, external


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def library_versions(packages: Iterable[str]) -> list[str]:
    """``name==version`` of each installed distribution that provides one of ``packages``
    (top-level import names; the standard library has none), sorted; Python's version first."""
    return list(_versions(frozenset(packages)))


@functools.lru_cache(maxsize=64)
def _versions(packages: frozenset[str]) -> tuple[str, ...]:
    """library_versions, once a process: what is installed does not change under a build."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    found = set()
    for package in packages:
        if package in stdlib:
            continue
        for dist in _distributions().get(package, []) or [package]:
            try:
                found.add(f"{dist}=={metadata.version(dist)}")
            except metadata.PackageNotFoundError:
                found.add(f"{dist}==(not installed)")
    return (f"python=={platform.python_version()}", *sorted(found))


def code_digest(*roots: ModuleType | str | Path) -> str:
    """A digest of the code ``roots`` run (modules, module names of the package, or source
    files such as a compiled dbt Python model): their source, that of every ``ableaudit``
    module they import and theirs, and the versions of the libraries those import."""
    files = []
    for root in roots:
        if isinstance(root, ModuleType):
            files.append(Path(root.__file__))
        elif isinstance(root, str) and root.split(".")[0] == PACKAGE and not root.endswith(".py"):
            found = module_file(root)
            if found is None:
                raise ValueError(f"no module {root!r} in {_ROOT}")
            files.append(found)
        else:
            files.append(Path(root))
    sources, external = closure(files)
    h = hashlib.sha256()
    for key in sorted(sources):
        h.update(f"{key}:{sources[key]}\n".encode())
    for line in library_versions(external):
        h.update(f"{line}\n".encode())
    return h.hexdigest()
