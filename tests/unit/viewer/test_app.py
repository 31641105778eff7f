"""What every request passes: the origin and token checks, the cookie, the report's files."""

from __future__ import annotations

import os

import pytest

from ableaudit.cli.view import _port
from ableaudit.viewer.app import Viewer, annotator_cookie, set_annotator_cookie
from ableaudit.viewer.report_pages import ReportPages
from ableaudit.viewer.sources import Sources


@pytest.fixture
def viewer(tmp_path):
    copy = tmp_path / "published" / "a.duckdb"
    copy.parent.mkdir()
    copy.write_bytes(b"")
    return Viewer(Sources(copy, None), 8123)


def test_only_the_viewers_own_origin_may_post(viewer):
    assert viewer.hosts == {"127.0.0.1:8123", "localhost:8123"}
    assert viewer.same_origin({}) and viewer.same_origin({"Origin": "http://127.0.0.1:8123"})
    assert viewer.same_origin({"Origin": "http://localhost:8123", "Sec-Fetch-Site": "same-origin"})
    assert not viewer.same_origin({"Origin": "http://127.0.0.1:9999"})
    assert not viewer.same_origin({"Origin": "null"})
    assert not viewer.same_origin({"Sec-Fetch-Site": "cross-site"})
    assert not viewer.same_origin({"Sec-Fetch-Site": "same-site"})
    assert viewer.token_ok(viewer.token) and not viewer.token_ok(viewer.token[:-1] + "x")
    assert len(viewer.token) >= 40 and Viewer(viewer.sources, 1).token != viewer.token


def test_the_annotator_cookie_round_trips_any_id():
    for name in ("alice", "Dr. Ng; team=2", "ünï cödé", 'q"uote'):
        header = set_annotator_cookie(name).split(";", 1)[0]
        assert annotator_cookie({"Cookie": f"other=1; {header}"}) == name
        assert "SameSite=Strict" in set_annotator_cookie(name)
    assert annotator_cookie({}) == "" and annotator_cookie({"Cookie": "=;;"}) == ""


def test_the_report_folder_serves_its_pages_and_nothing_else(tmp_path):
    copy = tmp_path / "published" / "a.duckdb"
    copy.parent.mkdir()
    copy.write_bytes(b"")
    report = copy.parent / "a" / "report"
    (report / "evidence").mkdir(parents=True)
    (report / "index.html").write_text('<body><header class="site-header"><p>r</p></header>')
    (report / "evidence" / "m.html").write_text("<p>m</p>")
    (report / ".evidence-pages.json").write_text("{}")
    (tmp_path / "secret.html").write_text("secret")
    os.utime(copy, (1, 1))  # the report is newer than the copy: it is the one served
    pages = ReportPages(copy)
    body, kind = pages.page("")
    assert kind.startswith("text/html") and b'<a href="/">Back to the viewer</a>' in body
    assert pages.page("evidence/m.html")[0] == b"<p>m</p>"
    for bad in (
        ".evidence-pages.json",
        "../../secret.html",
        "evidence/../../../secret.html",
        "missing.html",
        "evidence",
    ):
        assert pages.page(bad) is None, bad


@pytest.mark.parametrize(
    "value,ok",
    [
        ("0", True),
        ("8765", True),
        ("65535", True),
        ("65536", False),
        ("-1", False),
        ("http", False),
    ],
)
def test_the_port_flag(value, ok):
    import argparse

    if ok:
        assert _port(value) == int(value)
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="is not a port"):
            _port(value)
