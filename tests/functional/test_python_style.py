"""Python style: ruff lint and ruff format over the package, flows, dbt Python models, benchmarks and tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATHS = ["ableaudit", "flows", "python_models", "bench", "tests"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_lint_is_clean():
    out = _ruff("check", "--output-format", "concise")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_is_applied():
    out = _ruff("format", "--check")
    assert out.returncode == 0, (
        "run `.venv/bin/ruff format " + " ".join(PATHS) + "`:\n" + out.stdout + out.stderr
    )
