"""`ableaudit view` in a real browser, end to end: filter, compare two runs, rate, build.

tests/functional/viewer_browser.js drives Debian's Chromium with playwright-core against a
viewer serving a copy of the viewer world (tests/fixtures/viewer_world.py): axe-core on every
page (the viewer's own and the report's it serves), no request leaving the viewer, the skip
link, reflow at 200 % zoom; then, from the keyboard alone, a filter of the pairs, a
comparison of two runs and two blind ratings. The ratings must then be in `ableaudit history`
and, after `ableaudit build`, in the agreement mart, which the still-running viewer shows
from the new published copy. `make test` installs the npm packages (`npm ci`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from ableaudit.cli.main import main
from tests.fixtures.viewer_world import QUERIES, RUNS, generations, judgments
from tests.functional.test_viewer import get, pair_details, running

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("viewer_browser.js")
CHROMIUM = "/usr/bin/chromium"
ANNOTATOR = "browser-rater"


def _browser_tools() -> None:
    missing = [
        what
        for what, ok in (
            ("node (apt-get install -y nodejs)", shutil.which("node")),
            ("Chromium (apt-get install -y chromium)", Path(CHROMIUM).is_file()),
            *(
                (f"the npm package {p} (`npm ci`)", (ROOT / "node_modules" / p).is_dir())
                for p in ("axe-core", "playwright-core")
            ),
        )
        if not ok
    ]
    assert not missing, "the browser test needs " + ", ".join(missing)


def _drive(url: str, shots: Path, pages: list[str], *extra: str) -> dict:
    run = subprocess.run(
        ["node", str(SCRIPT), url, str(shots), CHROMIUM, json.dumps(pages), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def browsed(viewer_copy, tmp_path_factory):
    """The browser's findings, the history after its ratings, and the viewer's overview and the
    agreement mart after a build, with the viewer still running."""
    _browser_tools()
    shots = tmp_path_factory.mktemp("viewer_browser")
    with running(viewer_copy) as viewer:
        url = f"http://127.0.0.1:{viewer.port}"
        report = get(viewer, "/report/")
        evidence = re.search(r'href="(evidence/[^"#]+\.html)', report).group(1)
        pages = [
            "/",
            "/pairs",
            "/pairs?model=m-a&metric=vader&outcome=degraded",
            "/pairs?q=pwned",
            "/compare",
            "/compare?by=revision",
            "/compare?by=model&metric=judge_score:j1",
            "/rate/next?kind=rubric",
            "/rate/next?kind=contrastive",
            "/report/",
            "/report/significance.html",
            f"/report/{evidence}",
            "/no-such-page",
        ]
        found = _drive(url, shots / "before", pages)
        landings = [r["landing"] for r in found["ratings"]]
        history_after = {h["landing_id"]: h for h in _history(viewer_copy)}
        assert main(["build", "--warehouse", str(viewer_copy)]) == 0
        overview = get(viewer, "/")
        after = _drive(url, shots / "after", ["/", "/report/"], "pages-only")
    copy = viewer_copy.parent / "published" / viewer_copy.name
    con = duckdb.connect(str(copy), read_only=True)
    try:
        agreement = con.execute(
            "select * from agreement where rater_a = ? or rater_b = ?",
            [f"human:{ANNOTATOR}", f"human:{ANNOTATOR}"],
        ).df()
    finally:
        con.close()
    return {
        "found": found,
        "after": after,
        "landings": landings,
        "history": history_after,
        "overview": overview,
        "agreement": agreement,
        "shots": shots,
    }


def _history(live: Path) -> list[dict]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["history", "--json", "--warehouse", str(live)]) == 0
    return json.loads(out.getvalue())


def test_axe_core_finds_no_violation_on_any_page(browsed):
    pages = browsed["found"]["pages"] + browsed["after"]["pages"]
    assert len(pages) == 15
    assert {p["page"]: p["axe"] for p in pages if p["axe"]} == {}
    tasks = [browsed["found"]["filter"], browsed["found"]["compare"], *browsed["found"]["ratings"]]
    assert [t["axe"] for t in tasks] == [[]] * len(tasks)
    assert [r["ratedAxe"] for r in browsed["found"]["ratings"]] == [[], []]


def test_pages_answer_request_nothing_else_and_work_from_the_keyboard(browsed):
    for p in browsed["found"]["pages"] + browsed["after"]["pages"]:
        assert p["status"] == (404 if p["page"] == "/no-such-page" else 200), p["page"]
        # Chromium logs a page's own 404 status as a console error, and nothing else may be
        not_found = ["the server responded with a status of 404 (Not Found)"]
        errors = [e.split(": ", 1)[-1] for e in p["consoleErrors"]]
        assert errors == (not_found if p["page"] == "/no-such-page" else []), p["page"]
        assert p["requests"] == [], p["page"]
        marks = p["landmarks"]
        assert (marks["lang"], marks["main"], marks["h1"]) == ("en", 1, 1), p["page"]
        if not p["page"].startswith("/report/"):
            assert marks["scripts"] == 0, p["page"]  # the viewer's pages run no script
        assert p["firstFocus"] == "skip-link" and p["afterSkip"] == "main", p["page"]
        assert p["overflow"] <= 0, f"{p['page']} scrolls sideways at 200 % zoom"


def test_filtering_from_the_keyboard_shows_the_matching_pairs(browsed, viewer_copy):
    f = browsed["found"]["filter"]
    pairs = pair_details(viewer_copy)
    assert f["before"] == 20 and f["total"].startswith(f"{len(pairs)} pairs match; page 1 of 2")
    assert "model=m-a" in f["url"] and "disability=hearing" in f["url"] and "q=sadly" in f["url"]
    hits = pairs[
        (pairs.model_id == "m-a")
        & (pairs.disability_id == "hearing")
        & pairs.disability_response_text.str.lower().str.contains("sadly")
    ]
    assert f["count"] == f"{len(hits)} pairs match." and len(hits) == 3
    assert sorted(h.split(",")[0] for h in f["headings"]) == sorted(hits.query_id)
    assert all("hearing (m-a;" in h for h in f["headings"])


def test_comparing_two_runs_shows_each_pairs_change(browsed):
    c = browsed["found"]["compare"]
    assert "by=run" in c["url"] and "a=run-1" in c["url"] and "b=run-2" in c["url"]
    assert "metric=judge_score%3Aj1" in c["url"]
    assert c["summary"]["Pairs in both"] == "12" and c["pairs"] == 12
    assert c["sides"][:2] == ["A: run-1", "B: run-2"]
    # the judge's scores as the world landed them: the change in each pair's delta
    score = {
        j["generation_id"]: json.loads(j["parsed_json"])["score"] for j in judgments(generations())
    }
    ids = {
        (g["run_id"], g["query_id"], g["disability_id"]): g["generation_id"] for g in generations()
    }
    expected = {}
    for query_id, _ in QUERIES:
        for disability in ("vision", "hearing", "mobility"):
            delta = {
                run: score[ids[run, query_id, disability]] - score[ids[run, query_id, None]]
                for run in ("run-1", "run-2")
            }
            expected[query_id, disability] = delta["run-2"] - delta["run-1"]
    got = {}
    for caption in c["captions"]:
        m = re.match(r"judge_score:j1 of ([a-z]+_\d+), ([a-z]+): change in delta (.+)$", caption)
        got[m.group(1), m.group(2)] = float(m.group(3).replace("\u2212", "-"))
    assert got == expected


def test_two_blind_ratings_land_in_history_and_after_a_build_in_agreement(browsed):
    ratings = browsed["found"]["ratings"]
    items = [r["item"] for r in ratings]
    assert len(set(items)) == 2
    for r in ratings:
        assert re.fullmatch(r"[0-9a-f]{12}", r["landing"])
        for model, run, _, _ in RUNS:
            assert model not in r["shown"] and run not in r["shown"]
    for landing in browsed["landings"]:
        entry = browsed["history"][landing]
        assert entry["kind"] == "view-rating" and entry["rows"] == {"annotations": 1}
        assert ANNOTATOR in entry["source"]
    agreement = browsed["agreement"]
    row = agreement[(agreement.dimension == "judge_score")].set_index("rater_b")
    assert row.loc["judge:j1", "rater_a"] == f"human:{ANNOTATOR}"
    assert row.loc["judge:j1", "n_items"] == 2
    # the viewer, still running, reads the copy the build published
    assert f'<th scope="row">human:{ANNOTATOR}</th><td>judge:j1</td>' in browsed["overview"]
