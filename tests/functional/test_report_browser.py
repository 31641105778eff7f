"""The report in a real browser: every page opened from disk (file://) in headless Chromium.

tests/functional/report_browser.js drives Debian's Chromium with playwright-core and
runs axe-core (WCAG 2.0-2.2 A and AA rules and axe's best practices) on each page;
zero violations is the test. It also records every request that leaves the page's
own file, console errors, the sections present, the skip link from the keyboard,
the tables in a 1366 pixel wide window, sideways scrolling at 200 % zoom, and a drill-down page filtered by its address and
from the keyboard. Screenshots go to the test's temporary folder. `.ci/run` installs
Chromium; `make test` installs the npm packages (package.json, `npm ci`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ableaudit.report import render_report
from tests.functional.test_report import SECTIONS, compared_copy, gated_copy

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("report_browser.js")
CHROMIUM = "/usr/bin/chromium"


def _browser_tools() -> None:
    missing = []
    if not shutil.which("node"):
        missing.append("node (apt-get install -y nodejs)")
    if not Path(CHROMIUM).is_file():
        missing.append("Chromium (apt-get install -y chromium)")
    for package in ("axe-core", "playwright-core"):
        if not (ROOT / "node_modules" / package / "package.json").is_file():
            missing.append(
                f"the npm package {package} (`npm ci` in the repository root; `make test` runs it)"
            )
    assert not missing, "the browser test needs " + ", ".join(missing)


@pytest.fixture(scope="module")
def browsed(report_world, one_model_world, tmp_path_factory):
    _browser_tools()
    tmp = tmp_path_factory.mktemp("report_browser")
    results = {}
    # "gated": the rich world with release-gate verdicts, which open the report, and a target
    # with three runs (the run-to-run changes)
    gated = compared_copy(gated_copy(report_world, tmp / "gated-world"), tmp / "compared-world")
    for name, world in (("rich", report_world), ("one_model", one_model_world), ("gated", gated)):
        report = render_report(world, tmp / name)
        shots = tmp / f"screenshots-{name}"
        run = subprocess.run(
            ["node", str(SCRIPT), str(report.index.parent), str(shots), CHROMIUM],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        results[name] = {"pages": json.loads(run.stdout), "report": report, "shots": shots}
    return results


@pytest.mark.parametrize("world", ["rich", "one_model", "gated"])
def test_axe_core_finds_no_violation_on_any_page(browsed, world):
    pages = browsed[world]["pages"]
    assert len(pages) == len(browsed[world]["report"].pages) >= 4
    violations = {p["page"]: p["axe"] for p in pages if p["axe"]}
    assert violations == {}


@pytest.mark.parametrize("world", ["rich", "one_model", "gated"])
def test_pages_request_nothing_and_log_no_error(browsed, world):
    for p in browsed[world]["pages"]:
        assert p["requests"] == [], p["page"]
        assert p["consoleErrors"] == [], p["page"]
        assert p["landmarks"] == {"lang": "en", "main": 1, "nav": 1, "h1": 1}, p["page"]


@pytest.mark.parametrize("world", ["rich", "one_model", "gated"])
def test_every_table_column_is_reachable_in_a_1366_pixel_window(browsed, world):
    """At 1366 x 768 no page scrolls sideways; a table wider than its region scrolls inside it
    (overflow-x auto on a focusable region named by its caption), its last column header in reach."""
    tables = 0
    for p in browsed[world]["pages"]:
        wide = p["wide"]
        assert wide["overflow"] <= 0, f"{p['page']} scrolls sideways at 1366 pixels"
        for t in wide["tables"]:
            assert t["inside"] and t["reachable"], (p["page"], t)
            assert t["fits"] or (t["scrolls"] and t["focusable"] and t["named"]), (p["page"], t)
            tables += 1
    index = next(p for p in browsed[world]["pages"] if p["page"] == "index.html")
    assert max(t["columns"] for t in index["wide"]["tables"]) >= 10
    assert tables > 0


@pytest.mark.parametrize("world", ["rich", "one_model", "gated"])
def test_keyboard_and_zoom(browsed, world):
    for p in browsed[world]["pages"]:
        assert p["firstFocus"] == "skip-link" and p["afterSkip"] == "main", p["page"]
        assert p["overflow"] <= 0, f"{p['page']} scrolls sideways at 200 % zoom"


def test_every_section_and_a_drill_down_are_present(browsed):
    pages = {p["page"]: p for p in browsed["rich"]["pages"]}
    assert pages["index.html"]["sections"] == SECTIONS
    gated = {p["page"]: p for p in browsed["gated"]["pages"]}
    assert gated["index.html"]["sections"] == ["gates", "runs", *SECTIONS]
    evidence = [p for name, p in pages.items() if name.startswith("evidence")]
    assert len(evidence) == 5
    for p in evidence:
        f = p["filter"]
        assert f["formVisible"] and 0 < f["visible"] == f["expected"] < f["pairs"], p["page"]
        assert f["status"].startswith(f"{f['visible']} of {f['pairs']} pairs")
        assert f["afterTyping"] == 0 and f["afterReset"] == f["pairs"]
        m = f["byMetric"]
        assert m["selected"] == m["token"] and 0 < m["visible"] == m["expected"] <= m["ofSlice"]
    assert sum(p["filter"]["marks"] for p in evidence) > 0
    shots = sorted(browsed["rich"]["shots"].glob("*.png"))
    assert any(s.name == "index.html.png" for s in shots) and any(
        "filtered" in s.name for s in shots
    )
