"""The cell and figure markup written in Python reads exactly as Jinja writes the same
markup with the report's autoescaping, for every combination of a cell's fields."""

from __future__ import annotations

import itertools

import pytest
from jinja2 import Environment, select_autoescape

from ableaudit.report import markup
from ableaudit.report.records import Cell, Provenance, Source

# the same markup as a Jinja macro, the way the templates wrote it before: the reference
_MACROS = """
{% macro value(text, source) -%}
{% if source %}<span class="v" data-src="{{ source.relation }}" data-col="{{ source.column }}" data-k="{{ prov(source) }}"{% if source.agg %} data-agg="{{ source.agg }}"{% endif %}>{{ text }}</span>{% else %}{{ text }}{% endif %}
{%- endmacro %}
{% macro cell(c) -%}
{% if c.header -%}
<th scope="row">{{ c.text }}</th>
{%- else -%}
<td{% if c.numeric %} class="num{% if c.shade %} shaded{% endif %}"{% endif %}{% if c.shade %} style="background-color:{{ c.shade }};color:{{ c.ink }}"{% endif %}>
{%- if c.href %}<a href="{{ c.href }}"{% if c.link_label %} aria-label="{{ c.link_label }}"{% endif %}>{{ value(c.text, c.source) }}</a>{% else %}{{ value(c.text, c.source) }}{% endif %}
{%- if c.note %} <span class="note">{{ c.note }}</span>{% endif -%}
</td>
{%- endif %}
{%- endmacro %}
{% for c in cells %}{{ cell(c) }}{% endfor %}"""

HOSTILE = "a<b>&\"c'"


def _reference(cells: list[Cell]) -> str:
    env = Environment(
        autoescape=select_autoescape(default=True), trim_blocks=True, lstrip_blocks=True
    )
    return env.from_string(_MACROS).render(cells=cells, prov=Provenance()).strip()


def _every_cell() -> list[Cell]:
    # none, a row's value, a summary, and the first key again (numbered as before)
    sources = [
        None,
        Source("int_pair_scores", "neutral_score", {"pair_id": HOSTILE, "metric": "vader"}),
        Source(f"rel{HOSTILE}", f"col{HOSTILE}", {}, agg="count"),
        Source("int_pair_scores", "neutral_score", {"pair_id": HOSTILE, "metric": "vader"}),
    ]
    out = []
    for header, numeric, shade, href, label, note, source in itertools.product(
        (False, True), (False, True), (None, "#0b3c5d"), (None, f"e/{HOSTILE}.html#x"),
        (None, f"label {HOSTILE}"), (None, HOSTILE), sources,
    ):  # fmt: skip
        out.append(
            Cell(
                f"12.5% {HOSTILE}",
                source,
                numeric,
                shade,
                shade and "#ffffff",
                href,
                label,
                note,
                header,
            )
        )
    return out


def test_cells_read_as_the_jinja_markup_did():
    cells = _every_cell()
    assert str(markup.cells(Provenance(), cells)) == _reference(cells)


@pytest.mark.parametrize("text", [HOSTILE, 3, None, 0.25])
def test_a_figure_is_escaped_and_numbered_by_its_key(text):
    prov = Provenance()
    first = Source("significance", "p", {"slice": HOSTILE})
    again = Source("significance", "p_holm", {"slice": HOSTILE})
    other = Source("significance", "p", {"slice": "domain"})
    written = [str(markup.value(prov, text, s)) for s in (first, other, again)]
    assert [w.split('data-k="')[1].split('"')[0] for w in written] == ["0", "1", "0"]
    assert all(w.endswith(f">{_escaped(text)}</span>") for w in written)
    assert str(markup.value(prov, text, None)) == str(_escaped(text))


def _escaped(text: object) -> str:
    return Environment(autoescape=True).from_string("{{ t }}").render(t=text)
