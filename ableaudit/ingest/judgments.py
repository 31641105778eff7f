"""Land verdicts produced elsewhere (another harness, a hosted batch API, human-run judges).

``ableaudit import judgments FILE`` reads CSV, JSONL or Parquet with the columns

=========================  ========  ==================================================================
column                     required  meaning
=========================  ========  ==================================================================
judge_name                 yes       a name for the judge (several judges may score the same subjects)
judge_model                yes       the judge model, e.g. ``Qwen/Qwen2.5-72B-Instruct``
kind                       yes       ``rubric`` or ``contrastive``
generation_id              rubric    the response judged (a ``raw.generations`` id)
neutral_generation_id      contr.    response A, the neutral generation
disability_generation_id   contr.    response B, the disability generation of the same pair
raw_output                 yes       the judge's text, verbatim (parsed here, by the same parser)
prompt_version             no        default ``external``; name your prompt and its version (a
                                     contrastive verdict under the version of a dimension set in
                                     the warehouse is read against that set, else the built-in one)
judge_revision             no        the judge model's revision, if known
=========================  ========  ==================================================================

The file is validated whole before anything lands: a missing column, a bad
kind, an unknown generation id, a pair that is not a pair, an empty raw_output
or a duplicate row stops the import with one message listing the rows, and the
warehouse is left as it was. Verdicts land with ``source = 'imported'`` and the
same key rules as judged ones (a re-import changes nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ableaudit.ingest import files
from ableaudit.ingest.responses import require_columns
from ableaudit.judges.dimensions import DimensionSet, from_definition
from ableaudit.judges.items import contrastive_subject, judgment_key, rubric_subject
from ableaudit.judges.parsing import parse_verdict
from ableaudit.keys import content_key
from ableaudit.warehouse import connect
from ableaudit.warehouse.landing import LandingReport, land_judgments

REQUIRED = ("judge_name", "judge_model", "kind", "raw_output")
OPTIONAL = (
    "generation_id",
    "neutral_generation_id",
    "disability_generation_id",
    "prompt_version",
    "judge_revision",
)
PAIR_FIELDS = ("task", "model_id", "arm", "query_set", "query_id", "sample_index", "temperature")


TEXT_FIELDS = ("judge_name", "judge_model", "kind", "raw_output", "prompt_version")
"""Columns that must be strings: a JSON object as raw_output would be stored as its printout."""


class JudgmentImportError(ValueError):
    """The file cannot be imported; the message says what to fix."""


def _text(v: Any) -> str:
    return "" if v is None else str(v).strip()


def import_judgments(
    path: str | Path, warehouse: str | Path, run_id: str | None = None
) -> LandingReport:
    numbered = files.read_numbered(path, JudgmentImportError)
    rows = [r for _, r in numbered]
    require_columns(
        path,
        rows,
        REQUIRED,
        "plus generation_id (rubric) or neutral_generation_id and "
        "disability_generation_id (contrastive); optional: prompt_version, judge_revision",
        JudgmentImportError,
    )
    files.refuse_unknown_columns(
        path, files.columns_of(rows), (*REQUIRED, *OPTIONAL), JudgmentImportError
    )
    wanted = {
        _text(r.get(c))
        for r in rows
        for c in ("generation_id", "neutral_generation_id", "disability_generation_id")
    }
    wanted.discard("")
    con = connect(warehouse)
    try:
        found = con.execute(
            "select generation_id, status, condition, disability_id, prompt_text, response_text, "
            "task, model_id, arm, query_set, query_id, sample_index, temperature "
            "from raw.generations where generation_id in (select unnest(?))",
            [sorted(wanted)],
        ).fetchall()
        # the users' dimension sets the warehouse knows (raw.judge_dimension_sets), by prompt version
        definitions: dict[str, str] = dict(
            con.execute(
                "select prompt_version, any_value(definition) from raw.judge_dimension_sets "
                "group by prompt_version"
            ).fetchall()
        )
        labels: dict[str, str] = {}
        if con.execute(
            "select count(*) from information_schema.tables where table_schema = 'main' "
            "and table_name = 'stg_seeds__disabilities'"
        ).fetchone()[0]:
            labels = dict(
                con.execute(
                    "select disability_id, display_name from main.stg_seeds__disabilities"
                ).fetchall()
            )
    finally:
        con.close()
    cols = (
        "generation_id",
        "status",
        "condition",
        "disability_id",
        "prompt_text",
        "response_text",
        *PAIR_FIELDS,
    )
    gens = {r[0]: dict(zip(cols, r)) for r in found}

    sets: dict[str, DimensionSet] = {v: from_definition(d) for v, d in definitions.items()}
    problems: list[str] = []
    landing: list[dict[str, Any]] = []
    seen: dict[str, int] = {}

    def gen(where: str, column: str, gid: str) -> dict[str, Any] | None:
        if not gid:
            problems.append(f"{where}: {column} is empty")
            return None
        g = gens.get(gid)
        if g is None:
            problems.append(f"{where}: {column} {gid!r} is not in raw.generations")
        elif g["status"] != "ok":
            problems.append(
                f"{where}: {column} {gid!r} has status {g['status']!r}; only 'ok' generations are judged"
            )
            return None
        return g

    for i, r in numbered:
        where = f"row {i}"
        nul = files.nul_fields(r)
        if nul:
            problems.append(f"{where}: {', '.join(nul)} holds a NUL character (\\x00); remove it")
            continue
        not_text = [c for c in TEXT_FIELDS if r.get(c) is not None and not isinstance(r[c], str)]
        if not_text:
            problems.append(
                f"{where}: {', '.join(not_text)} must be text, not "
                f"{type(r[not_text[0]]).__name__}; serialise structured judge output to a string"
            )
            continue
        kind = _text(r.get("kind")).lower()
        name, model, raw = (
            _text(r.get("judge_name")),
            _text(r.get("judge_model")),
            r.get("raw_output"),
        )
        version = _text(r.get("prompt_version")) or "external"
        revision = _text(r.get("judge_revision")) or None
        if kind not in ("rubric", "contrastive"):
            hint = files.did_you_mean(r.get("kind"), ("rubric", "contrastive"))
            problems.append(
                f"{where}: kind {r.get('kind')!r} must be 'rubric' or 'contrastive'{hint}"
            )
            continue
        if not name or not model:
            problems.append(f"{where}: judge_name and judge_model must not be empty")
            continue
        if raw is None or not str(raw).strip():
            problems.append(
                f"{where}: raw_output is empty; leave the row out (a verdict that was never produced is not a verdict)"
            )
            continue
        raw = str(raw)
        ids: dict[str, str | None] = {
            "generation_id": None,
            "neutral_generation_id": None,
            "disability_generation_id": None,
        }
        if kind == "rubric":
            g = gen(where, "generation_id", _text(r.get("generation_id")))
            if g is None:
                continue
            disability = (
                labels.get(g["disability_id"], g["disability_id"])
                if g["condition"] == "disability"
                else None
            )
            subject = rubric_subject(g["prompt_text"], g["response_text"], disability)
            ids["generation_id"] = g["generation_id"]
            response_b = None
        else:
            a = gen(where, "neutral_generation_id", _text(r.get("neutral_generation_id")))
            b = gen(where, "disability_generation_id", _text(r.get("disability_generation_id")))
            if a is None or b is None:
                continue
            if a["condition"] != "neutral" or b["condition"] != "disability":
                problems.append(
                    f"{where}: neutral_generation_id must be a neutral generation and "
                    f"disability_generation_id a disability one (got {a['condition']}, {b['condition']})"
                )
                continue
            differ = [f for f in PAIR_FIELDS if a[f] != b[f]]
            if differ:
                problems.append(
                    f"{where}: the two generations are not a pair (they differ in {differ})"
                )
                continue
            subject = contrastive_subject(
                a["prompt_text"], a["response_text"], b["prompt_text"], b["response_text"]
            )
            ids["neutral_generation_id"], ids["disability_generation_id"] = (
                a["generation_id"],
                b["generation_id"],
            )
            response_b = b["response_text"]
        subject_hash = content_key(subject)
        # an imported judge is known only by what the file says: its name is part of
        # its identity, so two external judges on one model never overwrite each other
        identity = {
            "source": "imported",
            "judge_name": name,
            "judge_model": model,
            "judge_revision": revision,
        }
        key = judgment_key(identity, kind, version, subject_hash)
        if key in seen:
            problems.append(
                f"{where}: duplicates row {seen[key]} (same judge_name, judge_model, judge_revision, prompt_version, kind and subject)"
            )
            continue
        seen[key] = i
        dims = sets.get(version) if kind == "contrastive" else None
        verdict = parse_verdict(kind, raw, response_b, dims)
        landing.append(
            {
                "judgment_id": key,
                "judge_kind": kind,
                "judge_name": name,
                "judge_model": model,
                "judge_revision": revision,
                "prompt_version": version,
                **ids,
                "subject_hash": subject_hash,
                "raw_output": raw,
                "call_status": "ok",
                "parse_status": verdict.parse_status,
                "parsed_json": verdict.parsed_json,
                "parse_notes": verdict.notes_json,
                "error_message": None,
                "source": "imported",
                "run_id": run_id,
                # the set lands again with the verdicts asked on it (raw.judge_dimension_sets)
                "dimension_set": definitions[version] if dims is not None else None,
            }
        )
    if problems:
        raise JudgmentImportError(
            f"{path}: {len(problems)} row(s) cannot be imported; nothing was landed:\n"
            + files.listed(problems)
        )
    return land_judgments(warehouse, landing)
