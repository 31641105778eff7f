"""The shared file reader of the imports, and image headers read with or without Pillow."""

from __future__ import annotations

import sys

import pytest

from ableaudit.ingest import files
from ableaudit.media import MAX_IMAGE_PIXELS, image_size, image_size_problem
from tests.functional.hostile.cases import jpeg, png


class Refused(ValueError):
    pass


def test_csv_rows_are_numbered_by_the_line_they_start_on(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text('a,b\n1,"two\nlines"\n\n,\n3,4\n')
    blank: list[int] = []
    header, rows = files.read_csv(path, Refused, blank)
    assert header == ["a", "b"]
    assert rows == [(2, {"a": "1", "b": "two\nlines"}), (6, {"a": "3", "b": "4"})]
    assert blank == [4, 5]


def test_a_utf8_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "f.csv"
    path.write_bytes("\ufeffa,b\n1,2\n".encode())
    assert files.read_csv(path, Refused)[0] == ["a", "b"]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"a,b\n1,2\x00\n", "line 2 holds a NUL byte"),
        ("a,b\n1,2\n".encode("utf-32"), "encoded as UTF-32"),
        (b"a,b\n1,\xff\n", "line 2 is not UTF-8 (byte 0xff"),
        (b"a|b\n1|2\n", "separated by vertical bars"),
        (b" \n\n", "is empty"),
    ],
)
def test_a_file_that_is_not_comma_separated_utf8_is_refused(tmp_path, data, fragment):
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    with pytest.raises(Refused, match=fragment.replace("(", r"\(").replace("|", r"\|")):
        files.read_csv(path, Refused)


def test_did_you_mean_names_the_closest_choice_or_nothing():
    assert files.did_you_mean("Hearnig", ["hearing", "vision"]) == " (did you mean 'hearing'?)"
    assert files.did_you_mean("telepathy", ["hearing", "vision"]) == ""
    assert files.did_you_mean(None, ["hearing"]) == ""


def test_listed_counts_what_it_leaves_out():
    text = files.listed([f"p{i}" for i in range(13)])
    assert text.splitlines()[-1] == "  ... and 3 more"
    assert len(text.splitlines()) == files.LISTED + 1


@pytest.mark.parametrize("pillow", [True, False], ids=["pillow", "header-parser"])
def test_image_sizes_come_from_the_header_with_or_without_pillow(monkeypatch, pillow):
    if not pillow:
        monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL raises ImportError
    webp = b"RIFF" + b"\x00" * 4 + b"WEBPVP8X" + b"\x00" * 8 + (99).to_bytes(3, "little") * 2
    if pillow:
        webp = None  # Pillow checks more of a WebP than a hand-made header holds
    assert image_size(png(3, 5)) == (3, 5)
    assert image_size(jpeg(7, 2)) == (7, 2)
    assert image_size(png(0xFFFFFFFF, 1)) == (0xFFFFFFFF, 1)
    assert image_size(b"\x89PNG\r\n\x1a\n") is None
    if webp is not None:
        assert image_size(webp) == (100, 100)
    assert image_size_problem(png(3, 5)) is None
    assert "over the cap" in image_size_problem(png(100_000, 100_000))
    side = int(MAX_IMAGE_PIXELS**0.5)
    assert image_size_problem(png(side, side)) is None
    assert "over the cap" in image_size_problem(png(side + 1, side + 1))


def test_an_unnamed_column_is_refused_unless_the_reader_picks_columns_by_name(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text(",a,b\n0,1,2\n")
    with pytest.raises(Refused, match=r"empty column name at position\(s\) \[1\]"):
        files.read_csv(path, Refused)
    header, rows = files.read_csv(path, Refused, unnamed=True)
    assert header == ["column_1", "a", "b"] and rows[0][1]["a"] == "1"


def test_a_cell_over_the_csv_modules_default_limit_is_read_whole(tmp_path):
    import csv

    csv.field_size_limit(131_072)  # the module's default, whatever an earlier test set
    long = "word " * 60_000  # 300,000 characters
    path = tmp_path / "r.csv"
    path.write_text(f'model_id,response_text\nm,"{long}"\n', encoding="utf-8")
    _, rows = files.read_csv(path, ValueError)
    assert rows == [(2, {"model_id": "m", "response_text": long})]


HOSTILE_CELLS = [
    '=HYPERLINK("http://x.example","open")',
    "+1",
    "-2",
    "@SUM(A1)",
    "\tTab first",
    "\rCR first",
    "'=already quoted",
    "''",
    "'",
    "'plain quote",
    "plain",
    "",
]


@pytest.mark.parametrize("cell", HOSTILE_CELLS)
def test_a_cell_a_spreadsheet_would_run_is_escaped_and_comes_back_exactly(cell):
    escaped = files.escape_formula(cell)
    assert escaped[:1] not in files.FORMULA_STARTS
    assert files.unescape_formula(escaped) == cell
    if cell[:1] in files.FORMULA_STARTS:
        assert escaped == "'" + cell
