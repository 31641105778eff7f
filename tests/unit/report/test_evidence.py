"""Marking the spans a judge quoted, and the addresses of the drill-down pages."""

from __future__ import annotations

from ableaudit.report.evidence import (
    Links,
    ModelPage,
    Pair,
    Piece,
    anchor,
    slug,
    split_answer,
)
from ableaudit.report.records import Source


def joined(pieces: list[Piece]) -> str:
    return "".join(p.text for p in pieces)


def test_a_quoted_span_is_marked_where_it_occurs():
    text = "She is brave despite everything and works hard."
    pieces = split_answer(text, [("j1, stereotype", "brave despite everything")])
    assert joined(pieces) == text
    assert [(p.text, p.mark) for p in pieces if p.mark] == [
        ("brave despite everything", "quoted by j1, stereotype")
    ]


def test_overlapping_and_repeated_quotes_merge_and_case_is_forgiven():
    text = "He must struggle every day, sadly."
    pieces = split_answer(
        text,
        [
            ("j1, framing", "must struggle"),
            ("j1, stereotype", "Struggle every day"),
            ("j2, framing", "must struggle"),
        ],
    )
    marked = [p for p in pieces if p.mark]
    assert joined(pieces) == text and len(marked) == 1
    assert marked[0].text == "must struggle every day"
    assert marked[0].mark == "quoted by j1, framing; j1, stereotype; j2, framing"


def test_a_quote_not_in_the_answer_marks_nothing():
    text = "A plain answer."
    assert split_answer(text, [("j1, interpret", "not there"), ("j1, framing", "  ")]) == [
        Piece(text)
    ]


def test_slugs_are_file_names_and_stay_apart():
    a, b = slug("text", "ableaudit", "org/model-7B"), slug("text", "ableaudit", "org model 7B")
    assert a != b and a.startswith("text-ableaudit-org-model-7b-")
    assert all(c.isalnum() or c == "-" for c in a)


def _page(pairs: list[str]) -> ModelPage:
    made = [
        Pair(
            anchor(g),
            "baseline",
            "finance",
            "vision",
            "q1",
            "0.1",
            "0",
            "complete",
            None,
            "",
            "",
            "",
            [],
            [],
            [],
            "",
        )
        for g in pairs
    ]
    return ModelPage(
        "text",
        "ableaudit",
        "m",
        "evidence/m.html",
        made,
        [("baseline", "1", Source("int_pairs", "pair_id", {}, "count"), 1)],
        ["baseline"],
        ["finance"],
        ["vision"],
        [],
    )


def test_links_carry_the_cell_filters_and_point_at_a_pair_when_it_is_shown():
    links = Links([_page(["a" * 64])])
    assert (
        links("text", "ableaudit", "m", arm="baseline", disability="vision")
        == "evidence/m.html#arm=baseline&disability=vision"
    )
    assert (
        links("text", "ableaudit", "m", disability="vision", metric="vader", outcome="degraded")
        == "evidence/m.html#disability=vision&metric=vader&outcome=degraded"
    )
    assert links("text", "ableaudit", "m") == "evidence/m.html"
    assert links("text", "ableaudit", "m", gen="a" * 64) == "evidence/m.html#g-" + "a" * 16
    assert (
        links("text", "ableaudit", "m", gen="b" * 64) == "evidence/m.html"
    )  # not on the page: the page itself
    assert links("text", "ableaudit", "other") is None
