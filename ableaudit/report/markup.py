"""The report's smallest pieces of markup: a printed figure with its provenance, and a
table cell.

They are written here rather than as Jinja macros because a report prints one for every
figure, over a hundred thousand at a million generations, and a macro call costs more than
the markup it writes: the 1M report renders in about 0.8x the CPU this way
(docs/benchmarks.md). The templates call them with the page's
``Provenance`` (``value(prov, text, source)``); every text is escaped as the templates'
autoescaping would.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from markupsafe import Markup, escape

from ableaudit.report.records import Cell, Provenance, Source

_name = cache(escape)
"""``escape`` of a table's or column's name: a page names the same few thousands of times over."""


def value(prov: Provenance, text: object, source: Source | None) -> Markup:
    """``text``, inside an element naming where it comes from when ``source`` is set."""
    if not source:
        return escape(text)
    agg = f' data-agg="{_name(source.agg)}"' if source.agg else ""
    return Markup(
        f'<span class="v" data-src="{_name(source.relation)}" data-col="{_name(source.column)}" '
        f'data-k="{prov(source)}"{agg}>{escape(text)}</span>'
    )


def cell(prov: Provenance, c: Cell) -> Markup:
    """One cell: a row header, or a figure with its shade, link and note."""
    if c.header:
        title = f' title="{escape(c.title)}"' if c.title else ""
        return Markup(f'<th scope="row"{title}>{escape(c.text)}</th>')
    attrs = ""
    if c.numeric:
        attrs = ' class="num shaded"' if c.shade else ' class="num"'
    if c.shade:
        attrs += f' style="background-color:{escape(c.shade)};color:{escape(c.ink)}"'
    inner = value(prov, c.text, c.source)
    for words, text, source in c.more:
        inner += Markup(f'<span class="more">{escape(words)}{value(prov, text, source)}</span>')
    if c.href:
        label = f' aria-label="{escape(c.link_label)}"' if c.link_label else ""
        inner = Markup(f'<a href="{escape(c.href)}"{label}>{inner}</a>')
    note = f' <span class="note">{escape(c.note)}</span>' if c.note else ""
    return Markup(f"<td{attrs}>{inner}{note}</td>")


def cells(prov: Provenance, row: Iterable[Cell]) -> Markup:
    """A table row's cells, in order."""
    return Markup("").join(cell(prov, c) for c in row)
