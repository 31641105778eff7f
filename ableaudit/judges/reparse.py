"""Parsing landed verdicts again after the parser changed, without asking the judges."""

from __future__ import annotations

import json
from pathlib import Path

from ableaudit.judges.dimensions import DimensionSet, from_definition
from ableaudit.judges.parsing import parse_verdict
from ableaudit.warehouse import connect
from ableaudit.warehouse.landing import update_judgment_parses


def reparse_judgments(warehouse: str | Path) -> dict[str, int]:
    """Parse every landed verdict's raw_output again with the current parser.

    The judge's text is never changed; only parse_status, parsed_json and
    parse_notes are rewritten where the parser now reads it differently (after
    a parser fix). A contrastive verdict is read against the dimension set landed
    with it (raw.judge_dimension_sets), else the built-in set. Returns
    {'checked': n, 'changed': m}.
    """
    con = connect(warehouse)
    try:
        rows = con.execute(
            "select j.judgment_id, j.judge_kind, j.raw_output, j.parse_status, j.parsed_json, j.parse_notes, "
            "g.response_text, j.prompt_version from raw.judgments j left join raw.generations g "
            "on g.generation_id = j.disability_generation_id where j.call_status = 'ok'"
        ).fetchall()
        sets: dict[str, DimensionSet] = {
            version: from_definition(text)
            for version, text in con.execute(
                "select prompt_version, any_value(definition) from raw.judge_dimension_sets "
                "group by prompt_version"
            ).fetchall()
        }
        changed = []
        for jid, kind, raw, status, parsed, notes, response_b, version in rows:
            v = parse_verdict(kind, raw, response_b, sets.get(version))
            old_notes = json.loads(notes) if notes else []
            v.notes += [n for n in old_notes if n.startswith("judge_truncated:")]
            if (v.parse_status, v.parsed_json, v.notes_json) != (status, parsed, notes):
                changed.append((v.parse_status, v.parsed_json, v.notes_json, jid))
    finally:
        con.close()
    update_judgment_parses(warehouse, changed)
    return {"checked": len(rows), "changed": len(changed)}
