"""The package's import layers: no import circle between modules, nothing imported from a higher layer.

Read from the source with ``ast``, every import counted (module level, inside functions, under
``TYPE_CHECKING``). ``from package import submodule`` is an import of the submodule; a package's
own ``__init__`` running first is not counted as an import of it. A module may import any
module of its own layer or a lower one. The layers are declared once, in ``LAYERS``. No
import breaks the rules: ``KNOWN_EXCEPTIONS`` is empty, and an entry that no longer matches an
import fails too, so an exception added while a module is mended goes when it is.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ableaudit"

# Bottom first. A name covers the module and everything under it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("ableaudit", "ableaudit.records", "ableaudit.target", "ableaudit.errors", "ableaudit.keys"),
    ("ableaudit.media",),
    ("ableaudit.warehouse",),
    ("ableaudit.backends", "ableaudit.scorers", "ableaudit.stopping"),
    ("ableaudit.config", "ableaudit.judges.dimensions"),
    ("ableaudit.dbt",),
    ("ableaudit.judges", "ableaudit.stats", "ableaudit.adapters", "ableaudit.report"),
    ("ableaudit.gates",),
    ("ableaudit.ingest",),
    ("ableaudit.audit", "ableaudit.build"),
    ("ableaudit.queryset", "ableaudit.scoring", "ableaudit.viewer"),
    ("ableaudit.cli",),
)

# (importer, imported): why the import is still there, until its module is mended. None is.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def module_files(package: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that module ``name`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join(here + ([node.module] if node.module else []))
            submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            targets = submodules if len(submodules) == len(node.names) else [base, *submodules]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    files = module_files(package)
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int | None:
    """The index of the layer whose longest matching name covers ``module``."""
    best: tuple[int, int] | None = None
    for index, names in enumerate(layers):
        for prefix in names:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return None if best is None else best[1]


def upward_imports(
    graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...] = LAYERS
) -> list[tuple[str, str]]:
    return sorted(
        (a, b)
        for a, targets in graph.items()
        for b in targets
        if (layer_of(b, layers) or 0) > (layer_of(a, layers) or 0)
    )


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import circles, one per cycle found, breaking each at its first import to find the next."""
    remaining = {a: set(b) for a, b in graph.items()}
    found = []
    while True:
        try:
            graphlib.TopologicalSorter(remaining).prepare()
        except graphlib.CycleError as err:
            cycle = err.args[1]  # each module in it is imported by the next
            found.append(cycle[::-1])
            remaining[cycle[1]].discard(cycle[0])
        else:
            return found


def without_known(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {
        a: {b for b in targets if (a, b) not in KNOWN_EXCEPTIONS} for a, targets in graph.items()
    }


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_module_is_in_a_layer(graph):
    unplaced = sorted(m for m in graph if layer_of(m) is None)
    assert not unplaced, f"add these modules to a layer of LAYERS in {__file__}: {unplaced}"


def test_no_import_circles(graph):
    found = circles(without_known(graph))
    assert not found, "import circles (break each by moving the shared code down a module):\n" + (
        "\n".join(" -> ".join(c) for c in found)
    )


def test_nothing_is_imported_from_a_higher_layer(graph):
    upward = [edge for edge in upward_imports(graph) if edge not in KNOWN_EXCEPTIONS]
    assert not upward, "imports from a higher layer (move the code down, or the import up):\n" + (
        "\n".join(f"{a} imports {b}" for a, b in upward)
    )


def test_every_known_exception_is_still_an_import(graph):
    stale = sorted(edge for edge in KNOWN_EXCEPTIONS if edge[1] not in graph.get(edge[0], set()))
    assert not stale, f"these imports are gone: remove them from KNOWN_EXCEPTIONS: {stale}"


def test_the_checks_find_a_circle_and_an_upward_import(tmp_path):
    """The same functions on a package made here: a imports b, b imports a (a circle),
    and b, in the lower layer, imports the higher layer's module."""
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "a.py").write_text("def f():\n    from pkg.low import b\n")
    (package / "low" / "b.py").write_text("from . import a\nfrom pkg.high import thing\n")
    (package / "high.py").write_text("thing = 1\n")
    found = import_graph(package)
    assert found["pkg.low.a"] == {"pkg.low.b"}
    assert found["pkg.low.b"] == {"pkg.low.a", "pkg.high"}
    (circle,) = circles(found)
    assert set(circle) == {"pkg.low.a", "pkg.low.b"} and circle[0] == circle[-1]
    layers = (("pkg", "pkg.low"), ("pkg.high",))
    assert upward_imports(found, layers) == [("pkg.low.b", "pkg.high")]
    assert layer_of("pkg.low.a", layers) == 0 and layer_of("pkg.high", layers) == 1
