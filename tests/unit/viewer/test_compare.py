"""The compare page's choice: its defaults and its query string."""

from __future__ import annotations

from ableaudit.viewer.compare import Choice, _defaults


def test_the_choice_parses_and_prints_back():
    c = Choice.parse({"by": ["nonsense"], "a": [" r1 "], "page": ["0"]})
    assert (c.by, c.a, c.b, c.page) == ("run", "r1", "", 1)
    assert Choice.parse({"by": ["model"]}).by == "model"
    assert Choice("revision", "x", "y", "vader").query(page=2) == {
        "by": "revision",
        "a": "x",
        "b": "y",
        "metric": "vader",
        "page": "2",
    }


def test_the_default_sides_are_the_last_two_cohorts_of_one_model():
    runs = [
        {"id": "a1", "models": "m-a"},
        {"id": "b1", "models": "m-b"},
        {"id": "a2", "models": "m-a"},
        {"id": "a3", "models": "m-a"},
        {"id": "c1", "models": "m-c"},
    ]
    assert _defaults(runs, "run") == ("a2", "a3")
    assert _defaults(runs[:2], "run") == ("", "")
    models = [{"id": "m-a", "models": "m-a"}, {"id": "m-b", "models": "m-b"}]
    assert _defaults(models, "model") == ("m-a", "m-b") and _defaults(models[:1], "model") == (
        "",
        "",
    )
