"""ableaudit.dbt.code: the code a module runs, read from its import statements."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from ableaudit import PROJECT_ROOT
from ableaudit.dbt import code
from ableaudit.stats import paired


def test_closure_follows_imports_into_the_package_and_names_the_libraries(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(
        "import numpy as np\n"
        "from ableaudit.dbt.models import bootstrap_settings\n"
        "def model(dbt, session):\n"
        "    from ableaudit.stats import significance  # a function of a package: its package\n"
        "    return np, bootstrap_settings, significance\n"
    )
    sources, external = code.closure([model])
    # the model's own imports, the packages they are in, and what those import in turn
    assert {
        "ableaudit",
        "ableaudit.dbt",
        "ableaudit.dbt.models",
        "ableaudit.stats",
        "ableaudit.stats.paired",
        "ableaudit.stats._common",
    } <= set(sources)
    assert "ableaudit.stats.significance" not in sources  # a function, not a module
    assert {"numpy", "scipy", "statsmodels", "pandas"} <= external
    assert "ableaudit.warehouse.publish" not in sources  # nothing the model does not import


def test_relative_imports_resolve_against_the_package():
    sources, _ = code.closure([code.module_file("ableaudit.backends.vllm_backend")])
    # from ._common import ..., from .base import ..., from ..target import Target
    assert {"ableaudit.backends._common", "ableaudit.backends.base", "ableaudit.target"} <= set(
        sources
    )
    package = code.module_file("ableaudit.stats")
    assert package == Path(code._ROOT, "stats", "__init__.py")


def test_digest_changes_with_the_source_and_not_otherwise(tmp_path):
    model = tmp_path / "model.py"
    model.write_text("from ableaudit.stats import paired\n")
    first = code.code_digest(model)
    assert code.code_digest(model) == first
    model.write_text("from ableaudit.stats import paired\n# n_boot // 2\n")
    assert code.code_digest(model) != first
    # the module's own source is in the closure of a file that imports it
    assert code.code_digest(paired) != code.code_digest(model)


def test_library_versions_are_those_installed():
    lines = code.library_versions(["scipy", "os", "dbt"])
    assert f"scipy=={metadata.version('scipy')}" in lines
    assert f"dbt-core=={metadata.version('dbt-core')}" in lines
    assert f"dbt-duckdb=={metadata.version('dbt-duckdb')}" in lines
    assert not any(line.startswith("os==") for line in lines)  # the standard library


def test_each_statistics_mart_digests_its_own_settings_code():
    """The mart's own source (its compute) and the settings it reads through
    ableaudit.dbt.models.bootstrap_settings are in its digest, with the statistics."""
    sources, _ = code.closure([PROJECT_ROOT / "python_models" / "marts" / "significance.py"])
    assert {"<root 0>", "ableaudit.dbt.models", "ableaudit.stats.paired"} <= set(sources)


def test_an_unknown_module_is_an_error():
    with pytest.raises(ValueError, match="ableaudit.nothing_here"):
        code.code_digest("ableaudit.nothing_here")
