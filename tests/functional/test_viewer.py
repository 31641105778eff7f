"""`ableaudit view` over HTTP: the pages, the filters, the comparisons and a rating landed.

The viewer runs in a thread of the test over a copy of the viewer world
(tests/fixtures/viewer_world.py) and is asked with the standard library's HTTP client.
Filters are checked against pandas over ``pair_details`` read here, comparisons against VADER
computed with vaderSentiment on the world's own texts, and a rating against
``ableaudit history`` and ``raw.annotations`` in the live file. A second process holding
the live file (as a build does) or opening the copy for writing shows what the viewer holds.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import duckdb
import pandas as pd
import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.cli.main import main
from ableaudit.viewer.server import make_server
from ableaudit.viewer.sources import resolve
from tests.fixtures.viewer_world import HOSTILE, QUERIES, RUNS, answer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def running(live: Path):
    server, viewer = make_server(resolve(live), 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield viewer
    finally:
        server.shutdown()
        server.server_close()
        viewer.report.close()


@pytest.fixture(scope="module")
def viewer(viewer_copy):
    with running(viewer_copy) as v:
        yield v


def ask(viewer, method: str, path: str, body: dict | None = None, headers: dict | None = None):
    """(status, headers, text) of one request; redirects are returned, not followed."""
    con = http.client.HTTPConnection("127.0.0.1", viewer.port, timeout=180)
    sent = {"Host": f"127.0.0.1:{viewer.port}", **(headers or {})}
    data = None
    if body is not None:
        data = urlencode(body)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    con.request(method, path, body=data, headers=sent)
    response = con.getresponse()
    text = response.read().decode("utf-8")
    con.close()
    return response.status, dict(response.getheaders()), text


def get(viewer, path: str, **headers):
    status, got, text = ask(viewer, "GET", path, headers=headers)
    assert status == 200, (path, status, text[-2000:])
    return text


def main_part(html: str) -> str:
    return html[html.index("<main") : html.index("</main>")]


def pair_details(live: Path) -> pd.DataFrame:
    con = duckdb.connect(str(live.parent / "published" / live.name), read_only=True)
    try:
        return con.execute("select * from pair_details").df()
    finally:
        con.close()


def shown_pairs(html: str) -> list[tuple[str, str, str]]:
    """(model, query, disability) of every pair heading on a pairs page."""
    found = re.findall(r'<h2 id="pair-\d+">([^,]+), ([^ ]+) <span class="meta">\(([^;]+);', html)
    return [(m, q, d) for q, d, m in found]


def matched_count(html: str) -> int:
    return int(re.search(r'id="result-count">(\d+) pairs? match', html).group(1))


@pytest.mark.long
def test_pages_read_the_copy_while_a_build_holds_the_live_file(viewer, viewer_copy):
    """A second process holds the live file for writing, as a build does: every page still
    answers. After the requests, neither the live file nor the copy is held by the viewer."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "print('held', flush=True); time.sleep(60)",
            str(viewer_copy),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        for path in (
            "/",
            "/pairs",
            "/pairs?metric=vader&outcome=degraded",
            "/compare",
            "/compare?by=model",
            "/report/",
            "/static/viewer.css",
        ):
            get(viewer, path)
        status, headers, _ = ask(viewer, "GET", "/rate/next?kind=rubric")
        assert status == 303 and headers["Location"].startswith("/rate?kind=rubric&item=")
    finally:
        holder.kill()
        holder.wait()
    copy = viewer_copy.parent / "published" / viewer_copy.name
    for path in (viewer_copy, copy):  # a writer in another process gets each file at once
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import duckdb, sys; duckdb.connect(sys.argv[1]).close()",
                str(path),
            ],
            check=True,
            timeout=60,
        )


@pytest.mark.parametrize(
    "filters",
    [
        {"model": "m-a"},
        {"model": "m-b", "disability": "mobility"},
        {"metric": "vader", "outcome": "degraded"},
        {"metric": "vader", "outcome": "not_degraded", "domain": "finance"},
        {"metric": "regard", "outcome": "not_counted", "model": "m-b"},
        {"outcome": "degraded", "model": "m-a"},
        {"q": "SADLY"},
        {"q": "sadly", "model": "m-a", "disability": "hearing"},
    ],
    ids=lambda f: urlencode(f),
)
def test_filters_match_pandas_over_pair_details(viewer, viewer_copy, filters):
    pairs = pair_details(viewer_copy)
    keep = pd.Series(True, index=pairs.index)
    for name, col in (("model", "model_id"), ("disability", "disability_id"), ("domain", "domain")):
        if name in filters:
            keep &= pairs[col] == filters[name]
    named = [c[: -len("_included")] for c in pairs.columns if c.endswith("_included")]
    every = [m for m in named if f"{m}_degraded" in pairs.columns]
    metrics = [filters["metric"]] if "metric" in filters else every
    degraded = pairs[[f"{m}_degraded" for m in metrics]].fillna(False).astype(bool).any(axis=1)
    included = pairs[[f"{m}_included" for m in metrics]].astype(bool).any(axis=1)
    outcome = filters.get("outcome")
    if outcome == "degraded":
        keep &= degraded
    elif outcome == "not_degraded":
        keep &= included & ~degraded
    elif outcome == "not_counted":
        keep &= ~included
    if "q" in filters:
        q = filters["q"].lower()
        keep &= pairs.neutral_response_text.str.lower().str.contains(q, regex=False) | (
            pairs.disability_response_text.str.lower().str.contains(q, regex=False)
        )
    expected = pairs[keep]
    assert 0 < len(expected) < len(pairs), "the filter must keep some pairs and drop others"
    html = get(viewer, "/pairs?" + urlencode(filters))
    assert matched_count(html) == len(expected)
    shown = shown_pairs(html)
    assert len(shown) == min(20, len(expected))
    want = set(zip(expected.model_id, expected.query_id, expected.disability_id))
    assert set(shown) <= want
    if "metric" in filters and filters["metric"] == "vader":  # worst (lowest delta) first
        deltas = expected.set_index(["model_id", "query_id", "disability_id"])["vader_delta"]
        got = [deltas[s] for s in shown]
        assert got == sorted(got)


def test_an_unknown_filter_value_is_named_with_the_likely_one(viewer):
    html = get(viewer, "/pairs?model=m-aa")
    assert matched_count(html) == 0
    assert "No model &#39;m-aa&#39; in the published copy; did you mean &#39;m-a&#39;?" in html
    html = get(viewer, "/pairs?metric=vadr&outcome=sometimes")
    assert "No text metric &#39;vadr&#39; in pair_details; did you mean &#39;vader&#39;?" in html
    assert "No outcome &#39;sometimes&#39;" in html


VADER = SentimentIntensityAnalyzer()


def vader(text: str) -> float:
    return VADER.polarity_scores(text)["compound"]


def changes(html: str) -> dict[tuple[str, str], float]:
    """(query, disability) -> the printed change in delta, from each compared pair's caption."""
    found = re.findall(r"of ([a-z]+_\d+), ([a-z_]+): change in delta ([^<]+)</caption>", html)
    return {(q, d): float(v.replace("\u2212", "-")) for q, d, v in found}


def _latest(model: str) -> str:
    return [run for m, run, _, _ in RUNS if m == model][-1]


@pytest.mark.parametrize(
    "by,a,b,side_a,side_b",
    [
        ("run", "run-1", "run-2", ("m-a", "run-1"), ("m-a", "run-2")),
        ("revision", "r1", "r2", ("m-a", "run-1"), ("m-a", "run-2")),
        ("model", "m-a", "m-b", ("m-a", _latest("m-a")), ("m-b", _latest("m-b"))),
    ],
)
def test_compare_shows_each_pairs_change_as_vader_computes_it(viewer, by, a, b, side_a, side_b):
    html = get(viewer, "/compare?" + urlencode({"by": by, "a": a, "b": b, "metric": "vader"}))
    summary = dict(re.findall(r"<div><dt>([^<]+)</dt><dd>([^<]+)</dd></div>", html))
    assert summary["Pairs in both"] == "12"
    expected = {}
    for q_index, (query_id, _) in enumerate(QUERIES):
        for disability in ("vision", "hearing", "mobility"):
            deltas = [
                vader(answer(m, run, q_index, disability)) - vader(answer(m, run, q_index, None))
                for m, run in (side_a, side_b)
            ]
            expected[query_id, disability] = deltas[1] - deltas[0]
    got = changes(html)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=0.0006), key
    printed = list(got.values())
    assert [abs(v) for v in printed] == sorted((abs(v) for v in printed), reverse=True)
    mean = sum(expected.values()) / len(expected)
    assert float(summary["Mean change"].replace("\u2212", "-")) == pytest.approx(mean, abs=0.0006)
    if by == "run":  # the warehouse's own test of the two runs sits beside the pairs
        assert "run_comparison, overall" in html and "<td>regressed</td>" in html


def test_compare_defaults_to_the_last_two_runs_of_one_model(viewer):
    html = get(viewer, "/compare")
    assert '<option value="run-1" selected>' in html and '<option value="run-2" selected>' in html
    same = get(viewer, "/compare?by=run&a=run-1&b=run-1")
    assert "A and B are the same" in same


def test_an_answer_is_shown_as_text_never_as_markup(viewer):
    for path in ("/pairs?q=pwned", "/compare?by=run&a=run-1&b=run-2&metric=vader"):
        html = get(viewer, path)
        assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html
        assert "<script" not in html and "<img" not in html
        assert unescape(main_part(html)).count(HOSTILE) >= 1


def _rate_form(viewer, kind: str, headers: dict | None = None) -> tuple[str, str, str]:
    status, got, _ = ask(viewer, "GET", f"/rate/next?kind={kind}", headers=headers)
    assert status == 303
    location = got["Location"]
    item = parse_qs(urlsplit(location).query)["item"][0]
    html = get(viewer, location, **(headers or {}))
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    return item, token, html


def history(live: Path, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["history", "--json", "--warehouse", str(live)]) == 0
    return json.loads(capsys.readouterr().out)


def annotations(live: Path) -> pd.DataFrame:
    con = duckdb.connect(str(live), read_only=True)
    try:
        return con.execute("select * from raw.annotations order by loaded_at").df()
    finally:
        con.close()


def _post_rating(viewer, fields: dict, **headers):
    return ask(viewer, "POST", "/rate", fields, headers)


def _landed(headers: dict) -> dict[str, str]:
    assert headers["Location"].startswith("/rated?")
    query = urlsplit(headers["Location"]).query
    return {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}


def test_a_blind_rating_lands_with_a_landing_id_that_history_lists(viewer, viewer_copy, capsys):
    item, token, html = _rate_form(viewer, "rubric")
    page = main_part(html)
    for model, run, revision, _ in RUNS:  # nothing says which model, run or revision answered
        assert model not in page and run not in page and f"revision {revision}" not in page
    fields = {"token": token, "kind": "rubric", "item": item, "annotator": "http-rater"}
    status, headers, _ = _post_rating(viewer, {**fields, "judge_score": "8"})
    assert status == 303 and "ableaudit_annotator=http-rater" in headers["Set-Cookie"]
    landed = _landed(headers)
    assert landed["inserted"] == "1" and re.fullmatch(r"[0-9a-f]{12}", landed["landing"])
    rated = get(viewer, headers["Location"])
    assert f'<code id="landing-id">{landed["landing"]}</code>' in rated
    listed = {h["landing_id"]: h for h in history(viewer_copy, capsys)}
    entry = listed[landed["landing"]]
    assert entry["kind"] == "view-rating" and entry["status"] == "landed"
    assert entry["rows"] == {"annotations": 1}
    rows = annotations(viewer_copy)
    row = rows[rows.landing_id == landed["landing"]].iloc[0]
    assert (row.item_id, row.item_kind, row.dimension, row.annotator_id, row.value) == (
        item,
        "generation",
        "judge_score",
        "http-rater",
        "8",
    )
    assert row.source_file == "ableaudit view"
    # the same value again changes nothing and records no landing; a new value replaces it
    status, headers, _ = _post_rating(viewer, {**fields, "judge_score": "8"})
    assert _landed(headers)["landing"] == "" and _landed(headers)["unchanged"] == "1"
    assert len(history(viewer_copy, capsys)) == len(listed)
    status, headers, _ = _post_rating(viewer, {**fields, "judge_score": "9"})
    again = _landed(headers)
    assert again["replaced"] == "1" and again["landing"] not in listed
    rows = annotations(viewer_copy)
    assert rows[rows.item_id == item].value.tolist() == ["9"]
    # the next item for this annotator (the cookie names them) is another one
    cookie = {"Cookie": "ableaudit_annotator=http-rater"}
    status, got, _ = ask(viewer, "GET", "/rate/next?kind=rubric", headers=cookie)
    assert parse_qs(urlsplit(got["Location"]).query)["item"][0] != item


def test_a_pair_gets_the_contrastive_labels(viewer, viewer_copy):
    item, token, html = _rate_form(viewer, "contrastive")
    assert "Answer B" in html and 'name="interpret"' in html and 'name="abstain"' in html
    status, headers, _ = _post_rating(
        viewer,
        {
            "token": token,
            "kind": "contrastive",
            "item": item,
            "annotator": "pair-rater",
            "interpret": "yes",
            "abstain": "No",
        },
    )
    assert status == 303 and _landed(headers)["inserted"] == "2"
    rows = annotations(viewer_copy)
    mine = rows[rows.annotator_id == "pair-rater"].set_index("dimension")
    assert mine.loc["interpret", "value"] == "Yes" and mine.loc["abstain", "value"] == "No"
    assert set(mine.item_kind) == {"pair"} and set(mine.item_id) == {item}


def test_a_forged_or_wrong_rating_lands_nothing(viewer, viewer_copy):
    item, token, _ = _rate_form(viewer, "rubric")
    good = {
        "token": token,
        "kind": "rubric",
        "item": item,
        "annotator": "forger",
        "judge_score": "5",
    }
    before = len(annotations(viewer_copy))
    assert _post_rating(viewer, {**good, "token": "guessed"})[0] == 403
    assert _post_rating(viewer, good, Origin="http://evil.example")[0] == 403
    assert _post_rating(viewer, good, **{"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert _post_rating(viewer, good, Host="attacker.example:80")[0] == 421
    status, _, html = _post_rating(viewer, {**good, "judge_score": "11"})
    assert status == 400 and "judge_score score &#39;11&#39; is outside [1, 10]" in html
    assert 'value="11"' not in html and "The rating did not land" in html
    status, _, html = _post_rating(viewer, {**good, "annotator": "   "})
    assert status == 400 and "Give your annotator id" in html
    status, _, html = _post_rating(viewer, {**good, "judge_score": ""})
    assert status == 400 and "Choose a value for at least one question" in html
    status, _, _ = _post_rating(viewer, {**good, "item": "no-such-item"})
    assert status == 404
    assert len(annotations(viewer_copy)) == before


def test_a_rating_waits_while_another_process_holds_the_live_file(viewer, viewer_copy):
    """As a build does: the landing layer waits for the file, then lands the rating."""
    item, token, _ = _rate_form(viewer, "rubric")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "print('held', flush=True); time.sleep(4); c.close()",
            str(viewer_copy),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        status, headers, _ = _post_rating(
            viewer,
            {
                "token": token,
                "kind": "rubric",
                "item": item,
                "annotator": "patient",
                "judge_score": "4",
            },
        )
        waited = time.monotonic() - start
    finally:
        holder.wait(timeout=60)
    assert status == 303 and _landed(headers)["inserted"] == "1"
    assert waited > 1.5  # it landed once the holder let go, not before
    rows = annotations(viewer_copy)
    assert rows[rows.annotator_id == "patient"].value.tolist() == ["4"]


def test_a_new_publish_is_read_without_a_restart(viewer, viewer_copy):
    from ableaudit.warehouse.publish import publish

    def rated_in_copy() -> int:
        html = get(viewer, "/")
        return int(re.search(r"Human ratings in the copy: (\d+)", html).group(1))

    in_copy = rated_in_copy()
    landed = len(annotations(viewer_copy))
    assert landed > in_copy  # the tests above landed ratings the copy does not hold yet
    publish(viewer_copy)
    assert rated_in_copy() == landed


def test_the_reports_pages_are_served_with_a_way_back(viewer, viewer_copy):
    index = get(viewer, "/report/")
    assert (
        '<a href="/">Back to the viewer</a>' in index
        and "<h1>Disability-bias audit report" in index
    )
    assert ask(viewer, "GET", "/report")[0] == 303
    for bad in ("/report/../../etc/passwd", "/report/.evidence-pages.json", "/report/nope.html"):
        assert ask(viewer, "GET", bad)[0] == 404, bad
    # a report the build rendered from the copy as it is now is served as it is
    beside = viewer_copy.parent / "published" / viewer_copy.stem / "report"
    beside.mkdir(parents=True, exist_ok=True)
    (beside / "index.html").write_text('<header class="site-header"><p>built beside</p>')
    try:
        assert "built beside" in get(viewer, "/report/")
    finally:
        shutil.rmtree(beside)


def test_command_line_errors_name_the_fix(tmp_path, viewer_copy, capsys):
    assert main(["view", "--warehouse", str(tmp_path / "nothing.duckdb")]) == 2
    assert "no warehouse at" in capsys.readouterr().err
    lone = tmp_path / "unpublished" / "ableaudit.duckdb"
    lone.parent.mkdir()
    shutil.copy(viewer_copy, lone)
    assert main(["view", "--warehouse", str(lone)]) == 2
    err = capsys.readouterr().err
    assert "has no published copy" in err and "ableaudit publish --warehouse" in err
    with pytest.raises(SystemExit):
        main(["view", "--port", "70000"])
    assert "is not a port" in capsys.readouterr().err
    with running(viewer_copy) as busy:
        assert main(["view", "--warehouse", str(viewer_copy), "--port", str(busy.port)]) == 2
        assert "pass --port with a free port" in capsys.readouterr().err


def test_the_command_serves_until_ctrl_c(viewer_copy):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ableaudit.cli",
            "view",
            "--warehouse",
            str(viewer_copy),
            "--port",
            "0",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines[0].startswith("Reading ") and "published" in lines[0]
        url = re.search(r"Open (http://127\.0\.0\.1:(\d+)/)", lines[2])
        assert url, lines
        con = http.client.HTTPConnection("127.0.0.1", int(url.group(2)), timeout=60)
        con.request("GET", "/")
        assert con.getresponse().status == 200
        con.close()
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Viewer stopped." in out and err == ""
