"""Charts are inline SVG a screen reader can name, that scale with the page and never clash in ids."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ableaudit.report import charts

NS = "{http://www.w3.org/2000/svg}"


def _check(svg: str, chart_id: str, title: str) -> ET.Element:
    assert svg.startswith("<svg") and "<?xml" not in svg and "<!DOCTYPE" not in svg
    root = ET.fromstring(svg)
    assert root.get("role") == "img" and root.get("aria-labelledby") == f"{chart_id}-t {chart_id}-d"
    assert root.get("width") is None and root.get("height") is None and root.get("viewBox")
    assert (
        root.find(f"{NS}title").text == title
        and root.find(f"{NS}title").get("id") == f"{chart_id}-t"
    )
    assert root.find(f"{NS}desc").get("id") == f"{chart_id}-d"
    assert "Date" not in svg and "<metadata" not in svg
    return root


def test_line_scatter_and_interval_charts():
    line = charts.line_chart(
        "c1",
        "Rate by threshold",
        "Lines.",
        {"a": [(0, 50), (0.1, 40)], "b": [(0, 30), (0.1, 10)]},
        "threshold",
        "rate",
    )
    _check(line, "c1", "Rate by threshold")
    assert ">a<" in line or "a</text>" in line  # text stays text (svg.fonttype none)
    _check(
        charts.scatter_chart(
            "c2",
            "Size",
            "Points.",
            {"vader": [("m1", 1.0, 20.0), ("m2", 70.0, 40.0)]},
            "size",
            "rate",
        ),
        "c2",
        "Size",
    )
    _check(
        charts.interval_chart(
            "c3", "Shift", "Dots.", [("m1", -0.2, -0.4, 0.1), ("m2", 0.3, None, None)], "shift"
        ),
        "c3",
        "Shift",
    )


def test_two_charts_on_a_page_share_no_id():
    a = charts.line_chart("c1", "A", "A.", {"x": [(0, 1), (1, 2)]}, "x", "y")
    b = charts.line_chart("c2", "B", "B.", {"x": [(0, 1), (1, 2)]}, "x", "y")
    ids_a, ids_b = set(re.findall(r'\sid="([^"]+)"', a)), set(re.findall(r'\sid="([^"]+)"', b))
    assert ids_a and ids_b and not ids_a & ids_b
