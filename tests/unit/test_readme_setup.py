"""The README names what `make test` needs beyond the Python environment, and where the
`duckdb` command an audit suggests comes from."""

from __future__ import annotations

import re

from ableaudit import PROJECT_ROOT as ROOT
from tests.functional.test_report_browser import CHROMIUM


def test_the_readme_says_what_make_test_needs_and_where_duckdb_comes_from():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "npm ci" in makefile
    assert re.search(r"`make test` also needs node/npm", readme)
    assert f"Chromium at `{CHROMIUM}`" in readme
    assert "apt-get install -y nodejs npm chromium" in readme
    # the audit's summary suggests `duckdb -readonly`; the README says how to get it
    summary = (ROOT / "ableaudit" / "cli" / "audit.py").read_text(encoding="utf-8")
    assert "duckdb -readonly" in summary
    assert "`.venv/bin/pip install duckdb-cli`" in readme
