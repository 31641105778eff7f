"""SQL style: sqlfluff with `.sqlfluff` (duckdb dialect, dbt templater on the in-memory `ci`
target) finds nothing to say about the models and the dbt tests. Part of the default run, so CI lints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_sqlfluff_lint_is_clean():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sqlfluff",
            "lint",
            "models",
            "tests/dbt",
            "--format",
            "json",
            "--nocolor",
            "--processes",
            str(min(4, os.cpu_count() or 1)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    start = out.stdout.find("[")
    assert start >= 0, f"sqlfluff printed no report (exit {out.returncode}):\n{out.stderr[-3000:]}"
    files = json.loads(out.stdout[start:])
    assert len(files) > 40  # every model and dbt test was linted, not skipped
    problems = [
        f"{f['filepath']}:{v.get('start_line_no')}: {v['code']} {v['description']}"
        for f in files
        for v in f["violations"]
    ]
    assert not problems, "sqlfluff lint models tests/dbt:\n" + "\n".join(problems[:50])
