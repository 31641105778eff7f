"""What the report's templates render: tables of cells, charts, sections and pages.

These records hold text that is already formatted; the templates add markup only.
A cell that prints a number names the mart row and column it comes from
(``Source``), so the page carries its provenance and a test can compare every
printed figure with the warehouse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

_KEY_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode
"""``json.dumps`` with these options builds an encoder on every call; a page writes thousands of keys."""


@dataclass(frozen=True)
class Source:
    """Where a printed figure comes from."""

    relation: str
    """The mart (or intermediate table) read."""
    column: str
    """Its column."""
    key: dict[str, Any] = field(default_factory=dict)
    """Column values that select the row (empty with ``agg``)."""
    agg: str | None = None
    """'min', 'max', 'distinct' or 'count' when the figure summarises the rows matching ``key``; None for one row's value."""

    def key_json(self) -> str:
        """The key as compact JSON."""
        return _KEY_JSON(self.key)


class Provenance:
    """The keys of a page's figures, each written once.

    A figure's element names its table and column (``data-src``, ``data-col``)
    and the number of its row's key (``data-k``); the keys themselves are one
    JSON list at the end of the page (``<script type="application/json"
    id="provenance">``), so a row of ten figures carries its key once.
    """

    def __init__(self) -> None:
        self._index: dict[str, int] = {}

    def __call__(self, source: Source) -> int:
        """The number of ``source``'s key in this page's list."""
        return self._index.setdefault(source.key_json(), len(self._index))

    def json(self) -> Markup:
        """The list, safe inside a script element."""
        keys = sorted(self._index, key=self._index.__getitem__)
        return Markup("[" + ",".join(keys).replace("</", "<\\/") + "]")


@dataclass(frozen=True)
class Cell:
    """One table cell."""

    text: str
    """What is printed."""
    source: Source | None = None
    """Provenance of a printed figure; None for labels."""
    numeric: bool = False
    """Right-aligned, tabular figures."""
    shade: str | None = None
    """Background colour (hex) of a shaded table; the text colour is chosen for contrast."""
    ink: str | None = None
    """Text colour on ``shade``."""
    href: str | None = None
    """Link to the cell's evidence (the pairs behind it)."""
    link_label: str | None = None
    """Accessible name of that link: what the cell is, not just its number."""
    note: str | None = None
    """A short text after the figure (a marker such as 'significant', a direction word)."""
    header: bool = False
    """A row header (th scope=row)."""
    title: str | None = None
    """A row header's hover text: the id of the marts behind its display name."""
    more: tuple[tuple[str, str, Source | None], ...] = ()
    """Further figures printed after the main one, each (words before it, figure, provenance):
    a shaded rate's n and interval (no provenance for an 'n/a')."""


@dataclass(frozen=True)
class Table:
    """A data table with a caption, column headers and row headers."""

    caption: str
    """What the table shows, read first by screen readers."""
    columns: list[str]
    """Column headers (th scope=col), the row-header columns first."""
    rows: list[list[Cell]]
    """Cells, row by row; the first ``row_headers`` cells of a row are row headers."""
    row_headers: int = 1
    """How many leading cells of each row are row headers."""
    column_ids: list[str | None] = field(default_factory=list)
    """Optional hover text of each column header (the id of the marts behind a display name)."""
    column_groups: list[tuple[str, int]] = field(default_factory=list)
    """Optional spanning headers above ``columns``: (label, span), spans adding up to len(columns)."""
    shaded: bool = False
    """Cells carry a colour scale (a legend is rendered with the table)."""
    legend: str | None = None
    """The colour scale in words: what light and dark mean."""
    scale: str = "rate"
    """Which colour scale the shading uses: 'rate' (sequential) or 'change' (diverging); sets the legend's swatch."""
    note: str | None = None
    """A sentence under the table (what n/a means, what was left out)."""


@dataclass(frozen=True)
class Chart:
    """A chart as inline SVG, with its text alternative and the table of its data."""

    svg: str
    """The SVG markup (role=img, labelled by its title and description)."""
    title: str
    """Short name of the chart."""
    summary: str
    """The text alternative: what the chart shows, in a sentence or two."""
    table: Table
    """The chart's data, as a table."""


@dataclass
class Section:
    """One question the report answers."""

    anchor: str
    """Its id in the page (the table of contents links to it)."""
    title: str
    """Its heading."""
    question: str
    """The question, in one sentence."""
    data_statement: list[tuple[str, list[tuple[str, Source | None]]]] = field(default_factory=list)
    """What the section is computed on: (label, [(value text, provenance)]) for models, runs, pairs, threshold, judges."""
    blocks: list[Any] = field(default_factory=list)
    """Tables, charts, sub-headings (str) and paragraphs (Paragraph), in order."""
    empty: str | None = None
    """Set when the section's marts are empty: one sentence saying what would fill it."""


@dataclass(frozen=True)
class Heading:
    """A sub-heading inside a section."""

    text: str
    """The heading's text."""
    anchor: str | None = None
    """Its id, when something links to it."""


@dataclass(frozen=True)
class Paragraph:
    """A sentence or two of prose inside a section, or a link to another page of the report."""

    text: str
    """The text (escaped when rendered)."""
    href: str | None = None
    """When set, the paragraph is a link to this relative address."""


@dataclass
class Page:
    """A rendered file of the report."""

    path: str
    """Relative path under the report folder (POSIX)."""
    title: str
    """The page's title."""
    html: str = ""
    """The rendered HTML."""
