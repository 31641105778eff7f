"""The query validation of a build, run over a set made elsewhere: the built-in seed set,
an AccessEval-layout CSV, or a set landed in the warehouse. It reports what the rules
would remove and why; it changes nothing (``ableaudit queryset check``)."""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ableaudit.ingest.querysets import (
    BUILTIN_QUERY_SETS,
    PLACEHOLDER_RE,
    SEEDS_DIR,
    QuerySetError,
    _find_columns,
    domain_id,
    load_taxonomy,
    neutral_query_id,
)
from ableaudit.queryset.config import Validation
from ableaudit.queryset.rules import validate_queries


@dataclass
class CheckReport:
    source: str
    """What was checked."""
    items: list[dict[str, Any]]
    """Every query with its decision, reason and detail."""

    @property
    def removed(self) -> list[dict[str, Any]]:
        return [it for it in self.items if it["decision"] == "removed"]

    def summary(self) -> str:
        reasons = Counter(it["reason"] for it in self.removed)
        lines = [
            f"{self.source}: {len(self.items)} neutral queries; the build's rules would remove "
            f"{len(self.removed)}"
            + (
                " (" + ", ".join(f"{r} {n}" for r, n in reasons.most_common()) + ")"
                if reasons
                else ""
            )
        ]
        lines += [
            f"  {it['candidate_id']} [{it['reason']}] {it['neutral_query']!r}: {it['detail']}"
            for it in self.removed
        ]
        return "\n".join(lines)


def _seed_items() -> list[dict[str, Any]]:
    with open(SEEDS_DIR / "queries.csv", newline="", encoding="utf-8") as f:
        return [
            {
                "candidate_id": r["query_id"],
                "domain": r["domain"],
                "neutral_query": r["neutral_query"],
                "disability_template": r["disability_template"],
            }
            for r in csv.DictReader(f)
        ]


def _csv_items(path: Path) -> list[dict[str, Any]]:
    """One item per distinct neutral query of an AccessEval-layout CSV; its template when the
    disability-specific column holds one (a filled query has no placeholder to check)."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        cols = _find_columns(list(reader.fieldnames or []), path)
        items: dict[str, dict[str, Any]] = {}
        for r in reader:
            neutral = " ".join((r.get(cols["neutral"]) or "").split())
            dq = " ".join((r.get(cols["disability_query"]) or "").split())
            dom = domain_id(r.get(cols["domain"]) or "") or (r.get(cols["domain"]) or "").strip()
            qid = neutral_query_id(dom or "unknown", neutral)
            items.setdefault(
                qid,
                {
                    "candidate_id": qid,
                    "domain": dom,
                    "neutral_query": neutral,
                    "disability_template": dq if PLACEHOLDER_RE.search(dq) else None,
                },
            )
    return list(items.values())


def _landed_items(warehouse: str | Path, query_set: str) -> list[dict[str, Any]]:
    from ableaudit.warehouse.connection import connect

    con = connect(warehouse)
    try:
        rows = con.execute(
            "select query_id, domain, prompt_text from raw.external_queries "
            "where query_set = ? and disability_id is null order by domain, query_id",
            [query_set],
        ).fetchall()
        known = [
            r[0]
            for r in con.execute("select distinct query_set from raw.external_queries").fetchall()
        ]
    finally:
        con.close()
    if not rows:
        raise QuerySetError(
            f"{query_set!r} is neither the built-in set ({', '.join(BUILTIN_QUERY_SETS)}), a CSV "
            f"file, nor a set landed in {warehouse} (landed: {', '.join(sorted(known)) or 'none'})"
        )
    return [
        {"candidate_id": q, "domain": d, "neutral_query": t, "disability_template": None}
        for q, d, t in rows
    ]


def check_query_set(
    source: str, warehouse: str | Path | None = None, validation: Validation | None = None
) -> CheckReport:
    """Run the build's query validation over ``source``: 'ableaudit' (the seed set), a CSV
    path in the AccessEval layout, or the name of a set landed in ``warehouse``."""
    v = validation or Validation()
    path = Path(source).expanduser()
    if source in BUILTIN_QUERY_SETS:
        items = _seed_items()
    elif path.suffix.lower() == ".csv" or path.is_file():
        if not path.is_file():
            raise QuerySetError(f"{path} does not exist or is not a file")
        items = _csv_items(path)
    else:
        from ableaudit.warehouse import warehouse_path

        items = _landed_items(warehouse_path(warehouse), source)
    phrases = [d["query_phrase"] for d in load_taxonomy()]
    validate_queries(items, similarity=v.query_similarity, phrases=phrases)
    return CheckReport(source, items)
