"""The report's sections, in order: each page answers one question from the marts, and says what data it rests on.

Every figure printed is a value of a mart row (or, for the drill-down, of an
intermediate table), formatted by ``ableaudit.report.format`` and carried with
its ``Source``; nothing is recomputed here. A section whose marts are empty keeps
its heading and says in one sentence what would fill it. Each page lives in
``ableaudit.report.pages``; the code they share in ``ableaudit.report.tables``.
"""

from __future__ import annotations

from dataclasses import replace

from ableaudit.report.pages.assistive_technology import assistive_technology
from ableaudit.report.pages.data_quality import data_quality_rows as data_quality_rows
from ableaudit.report.pages.gates import release_gates
from ableaudit.report.pages.headline import headline
from ableaudit.report.pages.mitigation import mitigation
from ableaudit.report.pages.robustness import robustness
from ableaudit.report.pages.runs import run_to_run
from ableaudit.report.pages.scaling import scaling
from ableaudit.report.pages.sensitivity import sensitivity
from ableaudit.report.pages.shaded import shaded_tables
from ableaudit.report.pages.significance import SIG_COLUMNS as SIG_COLUMNS
from ableaudit.report.pages.significance import significance
from ableaudit.report.pages.significance import significance_rows as significance_rows
from ableaudit.report.pages.trust import trust
from ableaudit.report.pages.vision import vision
from ableaudit.report.records import (
    Section,
    Table,
)
from ableaudit.report.tables import Context
from ableaudit.report.tables import json_dumps as json_dumps

BUILDERS = (
    release_gates,
    run_to_run,
    headline,
    shaded_tables,
    sensitivity,
    scaling,
    significance,
    robustness,
    vision,
    mitigation,
    assistive_technology,
    trust,
)


def build_sections(ctx: Context) -> list[Section]:
    """Every section, in the report's order (the release gates only when there are verdicts, the
    run-to-run changes only when a target has two runs); a colour scale's legend is printed
    under the first table that uses it, once per page."""
    sections = [section for builder in BUILDERS if (section := builder(ctx)) is not None]
    seen: set[str] = set()
    for section in sections:
        for i, block in enumerate(section.blocks):
            if isinstance(block, Table) and block.shaded and block.legend:
                if block.legend in seen:
                    section.blocks[i] = replace(block, legend=None)
                seen.add(block.legend)
    return sections
