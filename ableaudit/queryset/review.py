"""Human review of a built query set: a sheet out, the decisions back in, all or nothing.

``export-review`` writes one row per query that passed validation, with its persona
and texts, and empty columns for the reviewer: ``decision`` (accept, reject or edit)
and, for an edit, the edited neutral query and template. ``import-review`` reads the
sheet back; every row is checked (the set, the query, the decision, the edited texts
against the same rules the build applies) and any problem stops the import with one
line per bad row, so a sheet lands whole or not at all. A landed review publishes the set.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

from ableaudit.errors import AbleauditError
from ableaudit.queryset.build import build_config, publish, taxonomy
from ableaudit.queryset.lexicon import find_leaks, leakage_patterns
from ableaudit.queryset.rules import placeholder_problem
from ableaudit.warehouse import queryset_landing as landing

COLUMNS = (
    "query_set",
    "query_id",
    "domain",
    "persona",
    "neutral_query",
    "disability_template",
    "decision",
    "edited_neutral_query",
    "edited_disability_template",
    "reviewer",
    "note",
)
"""The sheet's columns; the reviewer fills the last five."""

DECISIONS = ("accept", "reject", "edit")


class ReviewError(AbleauditError, ValueError):
    """A review sheet cannot be landed; the message lists every bad row."""


def resolve_query_set(warehouse: str | Path, name: str) -> str:
    """NAME@VERSION as given, or the latest built version of NAME."""
    from ableaudit.warehouse.connection import connect

    con = connect(warehouse)
    try:
        rows = con.execute(
            "select query_set from raw.queryset_builds where query_set = ? or name = ? "
            "order by query_set = ? desc, created_at desc",
            [name, name, name],
        ).fetchall()
        known = [r[0] for r in con.execute("select query_set from raw.queryset_builds").fetchall()]
    finally:
        con.close()
    if not rows:
        raise ReviewError(
            f"no built query set {name!r} in {warehouse} (built: {', '.join(sorted(known)) or 'none'}); "
            "run `ableaudit queryset build --config FILE` first"
        )
    return rows[0][0]


def export_review(warehouse: str | Path, name: str, out: Path | None = None) -> tuple[Path, int]:
    """Write the review sheet of a built set; returns its path and its number of rows."""
    query_set = resolve_query_set(warehouse, name)
    rows = [
        c
        for c in landing.read_table(warehouse, "queryset_candidates", query_set)
        if c["stage"] == "queries" and c["decision"] == "kept"
    ]
    rows.sort(key=lambda c: (c["domain"], c["candidate_id"]))
    path = Path(out) if out is not None else Path(f"{query_set.replace('@', '-v')}-review.csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for c in rows:
            w.writerow(
                {
                    "query_set": query_set,
                    "query_id": c["candidate_id"],
                    "domain": c["domain"],
                    "persona": c["persona"],
                    "neutral_query": c["neutral_query"],
                    "disability_template": c["disability_template"],
                }
            )
    return path, len(rows)


def _read(path: Path) -> list[tuple[int, dict[str, str]]]:
    if not path.is_file():
        raise ReviewError(f"review sheet {path} does not exist")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        missing = [
            c for c in ("query_set", "query_id", "decision") if c not in (reader.fieldnames or [])
        ]
        if missing:
            raise ReviewError(
                f"{path} lacks column(s) {', '.join(missing)}; write the sheet with "
                "`ableaudit queryset export-review NAME` and fill in `decision`"
            )
        return [
            (i, {k: (v or "").strip() for k, v in row.items() if k})
            for i, row in enumerate(reader, start=2)
        ]


def check_review(warehouse: str | Path, path: Path) -> tuple[str, list[dict[str, Any]]]:
    """The set a sheet reviews and its rows ready to land; ReviewError listing every bad row."""
    records = _read(path)
    sets = Counter(r["query_set"] for _, r in records)
    if len(sets) != 1:
        raise ReviewError(
            f"{path} must review one query set; it names {dict(sets) or 'none'} "
            "(export one sheet per set)"
        )
    query_set = resolve_query_set(warehouse, next(iter(sets)))
    if landing.published_config(warehouse, query_set) is not None:
        raise ReviewError(
            f"query set {query_set} is published already; build a new `version:` to review again"
        )
    candidates = {
        c["candidate_id"]: c
        for c in landing.read_table(warehouse, "queryset_candidates", query_set)
        if c["stage"] == "queries"
    }
    patterns = leakage_patterns(
        c["query_phrase"] for c in taxonomy(build_config(warehouse, query_set))
    )
    problems: list[str] = []
    seen: dict[str, int] = {}
    out = []
    for line, r in records:
        qid, decision = r.get("query_id", ""), r.get("decision", "").lower()
        where = f"{path}, line {line} (query_id {qid!r})"
        c = candidates.get(qid)
        if c is None:
            problems.append(f"{where}: no such query in {query_set}")
            continue
        if c["decision"] != "kept":
            problems.append(
                f"{where}: validation removed this query ({c['reason']}); delete the row"
            )
            continue
        if qid in seen:
            problems.append(f"{where}: reviewed twice (first on line {seen[qid]}); keep one row")
            continue
        seen[qid] = line
        if decision not in DECISIONS:
            problems.append(
                f"{where}: decision {r.get('decision', '')!r} must be one of {', '.join(DECISIONS)}"
            )
            continue
        neutral, template = c["neutral_query"], c["disability_template"]
        if decision == "edit":
            neutral = r.get("edited_neutral_query") or neutral
            template = r.get("edited_disability_template") or template
            if (neutral, template) == (c["neutral_query"], c["disability_template"]):
                problems.append(
                    f"{where}: decision edit needs edited_neutral_query or "
                    "edited_disability_template (or decide accept)"
                )
                continue
            problem = placeholder_problem(neutral, template)
            leaks = find_leaks(neutral, patterns)
            if problem is not None:
                problems.append(f"{where}: the edit is refused: {problem[1]}")
                continue
            if leaks:
                terms = ", ".join(repr(leak.term) for leak in leaks)
                problems.append(f"{where}: the edited neutral query mentions {terms}; reword it")
                continue
        out.append(
            {
                "query_set": query_set,
                "candidate_id": qid,
                "decision": decision,
                "neutral_query": neutral,
                "disability_template": template,
                "reviewer": r.get("reviewer") or None,
                "note": r.get("note") or None,
            }
        )
    unreviewed = sorted(
        q for q, c in candidates.items() if c["decision"] == "kept" and q not in seen
    )
    if unreviewed:
        problems.append(
            f"{path}: {len(unreviewed)} kept quer{'y has' if len(unreviewed) == 1 else 'ies have'} "
            f"no row: {', '.join(unreviewed[:5])}{' ...' if len(unreviewed) > 5 else ''}; "
            "export the sheet again"
        )
    if records and not problems and all(r["decision"] == "reject" for r in out):
        problems.append(f"{path}: every query is rejected; nothing would be published")
    if problems:
        raise ReviewError(
            f"review sheet {path} not landed ({len(problems)} problem(s)); nothing was changed:\n"
            + "\n".join(f"  {p}" for p in problems)
        )
    return query_set, out


def import_review(warehouse: str | Path, path: Path) -> tuple[str, Counter, int]:
    """Land a review sheet and publish its set; returns the set, the decisions and the
    number of prompts published."""
    query_set, rows = check_review(warehouse, Path(path))
    landing.land_reviews(warehouse, query_set, rows, str(Path(path).resolve()))
    n = publish(warehouse, query_set)
    return query_set, Counter(r["decision"] for r in rows), n
