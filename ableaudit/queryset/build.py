"""The stages of a query-set build, after AccessEval's persona-driven pipeline (section 3.2):

1. personas per domain, from the generator (structured where the backend supports it),
   plus the config's seed personas;
2. persona validation (``rules.validate_personas``);
3. per kept persona, a neutral query and a disability-aware template with one
   ``{disability}`` placeholder;
4. query validation (``rules.validate_queries``), with the generator's optional leakage check;
5. human review (``review``), unless the config skips it;
6. publishing: the kept queries, filled with each category's phrase, become query set
   NAME@VERSION in raw.external_queries, which ``int_prompts`` and audits read.

Each stage's generator calls land as they come (``generating``); the personas and their
decisions land with the build's provenance once persona validation ends, the queries and
theirs once query validation ends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ableaudit.errors import AbleauditError
from ableaudit.keys import model_fingerprint
from ableaudit.queryset import prompts as P
from ableaudit.queryset.config import BuildConfig
from ableaudit.queryset.generating import (
    Ask,
    LazyBackend,
    StageReport,
    generator_identity,
    make_ask,
    run_asks,
)
from ableaudit.queryset.rules import validate_personas, validate_queries
from ableaudit.warehouse import queryset_landing as landing


class QuerySetBuildError(AbleauditError, ValueError):
    """A build cannot go on as asked; the message says why and what to do."""


def _short(*parts: Any) -> str:
    return hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:10]


def taxonomy(cfg: BuildConfig) -> list[dict[str, str]]:
    """The categories the templates are filled with (the project's, or the config's file,
    whose ids must be the project's: marts join them to the disability seed)."""
    from ableaudit.ingest.querysets import load_taxonomy

    project = load_taxonomy()
    if cfg.taxonomy is None:
        return project
    import csv

    path = Path(cfg.taxonomy)
    if not path.is_file():
        raise QuerySetBuildError(f"taxonomy: {path} does not exist; give a disabilities CSV")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    known = {d["disability_id"] for d in project}
    for line, row in enumerate(rows, start=2):
        did, phrase = (row.get("disability_id") or "").strip(), (row.get("query_phrase") or "")
        if did not in known or not phrase.strip():
            raise QuerySetBuildError(
                f"taxonomy {path}, line {line}: disability_id {did!r} must be one of "
                f"{sorted(known)} with a non-empty query_phrase"
            )
    return rows


@dataclass
class BuildReport:
    """What a build did, stage by stage."""

    query_set: str
    """NAME@VERSION."""
    stages: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per stage: generator calls (asked, landed_before, generated, errors) and decisions
    (candidates, kept, removed)."""
    published: bool = False
    """Whether the set was published (review: skip)."""

    @property
    def generated(self) -> int:
        return sum(s.get("generated", 0) for s in self.stages.values())

    @property
    def errors(self) -> int:
        return sum(s.get("errors", 0) for s in self.stages.values())

    def summary(self) -> str:
        lines = [f"query set {self.query_set}:"]
        for stage, s in self.stages.items():
            calls = (
                f"{s.get('asked', 0)} generator calls ({s.get('landed_before', 0)} landed before, "
                f"{s.get('generated', 0)} generated, {s.get('errors', 0)} failed)"
            )
            kept = f"; {s['kept']} of {s['candidates']} kept" if "candidates" in s else ""
            lines.append(f"  {stage}: {calls}{kept}")
        return "\n".join(lines)


def _stage_counts(report: StageReport, items: Sequence[dict[str, Any]] | None = None) -> dict:
    out = {
        "asked": report.asked,
        "landed_before": report.landed_before,
        "generated": report.generated,
        "errors": report.errors,
    }
    if items is not None:
        out["candidates"] = len(items)
        out["kept"] = sum(1 for it in items if it["decision"] == "kept")
    return out


def persona_candidates(
    cfg: BuildConfig, asks: dict[str, Ask], answers: dict[str, str]
) -> list[dict[str, Any]]:
    """The config's seed personas first, then each domain's generated ones; an answer that
    cannot be read is one candidate removed as 'unparseable'."""
    items: list[dict[str, Any]] = []
    for d in cfg.domains:
        for persona in d.seed_personas:
            items.append(
                {
                    "stage": "personas",
                    "candidate_id": f"{d.id}-p-{_short('config', persona.strip().lower())}",
                    "domain": d.id,
                    "persona": persona.strip(),
                    "persona_description": "",
                    "origin": "config",
                    "generation_id": None,
                }
            )
    for d in cfg.domains:
        ask = asks[d.id]
        if ask.key not in answers:
            continue  # failed: asked again by the next build
        parsed = P.parse_personas(answers[ask.key])
        base = {
            "stage": "personas",
            "domain": d.id,
            "origin": "generated",
            "generation_id": ask.key,
        }
        if parsed is None:
            items.append(
                {
                    **base,
                    "candidate_id": f"{d.id}-p-{_short(ask.key, 'unparsed')}",
                    "decision": "removed",
                    "reason": "unparseable",
                    "detail": answers[ask.key][:200],
                }
            )
            continue
        for i, p in enumerate(parsed):
            items.append(
                {
                    **base,
                    "candidate_id": f"{d.id}-p-{_short(ask.key, i)}",
                    "persona": p["persona"],
                    "persona_description": p["description"],
                }
            )
    for it in items:
        it["persona_id"] = it["candidate_id"]
    return items


def query_candidates(
    personas: Sequence[dict[str, Any]], asks: dict[str, Ask], answers: dict[str, str]
) -> list[dict[str, Any]]:
    items = []
    for p in personas:
        ask = asks[p["candidate_id"]]
        if ask.key not in answers:
            continue
        parsed = P.parse_query(answers[ask.key])
        item = {
            "stage": "queries",
            "candidate_id": f"{p['domain']}-q-{_short(ask.key)}",
            "domain": p["domain"],
            "persona_id": p["candidate_id"],
            "persona": p["persona"],
            "persona_description": p["persona_description"],
            "origin": "generated",
            "generation_id": ask.key,
        }
        if parsed is None:
            item.update(decision="removed", reason="unparseable", detail=answers[ask.key][:200])
        else:
            item.update(parsed)
        items.append(item)
    return items


def build_query_set(
    warehouse: str | Path,
    cfg: BuildConfig,
    backend: LazyBackend,
    log: Callable[[str], None] = print,
) -> BuildReport:
    """Stages 1 to 4 (and 6 when the config skips review); see the module's docstring."""
    qs = cfg.query_set
    published = landing.published_config(warehouse, qs)
    if published is not None and published != cfg.stored_json():
        raise QuerySetBuildError(
            f"query set {qs} is published and its config has changed since; a published "
            f"version never changes: give the config a new `version:`"
        )
    if published is not None:
        log(f"query set {qs} is published already; nothing to build")
        return BuildReport(qs, published=True)
    report = BuildReport(qs)
    cats = taxonomy(cfg)
    phrases = [c["query_phrase"] for c in cats]
    identity = generator_identity(cfg)
    structured = cfg.structured
    descriptions = {d.id: d.description for d in cfg.domains}

    # 1. personas
    persona_asks = {
        d.id: make_ask(
            identity,
            structured,
            "personas",
            d.id,
            None,
            P.persona_messages(d.id, d.description, cfg.personas_per_domain),
            P.persona_schema(cfg.personas_per_domain),
        )
        for d in cfg.domains
    }
    stage = run_asks(warehouse, cfg, list(persona_asks.values()), backend)
    personas = persona_candidates(cfg, persona_asks, stage.answers)

    # 2. persona validation
    v = cfg.validation
    validate_personas(
        personas,
        descriptions,
        similarity=v.persona_similarity,
        off_domain=v.off_domain_similarity,
        phrases=phrases,
    )
    report.stages["personas"] = _stage_counts(stage, personas)
    log(f"personas: {report.stages['personas']}")
    # personas land as soon as they are decided: a query stage that stops keeps them
    landing.record_build(warehouse, build_row(cfg), domain_rows(cfg), personas)

    # 3. queries
    kept_personas = [p for p in personas if p["decision"] == "kept"]
    query_asks = {
        p["candidate_id"]: make_ask(
            identity,
            structured,
            "queries",
            p["domain"],
            p["candidate_id"],
            P.query_messages(
                p["domain"], descriptions[p["domain"]], p["persona"], p["persona_description"]
            ),
        )
        for p in kept_personas
    }
    stage = run_asks(warehouse, cfg, list(query_asks.values()), backend)
    queries = query_candidates(kept_personas, query_asks, stage.answers)

    # 4. query validation, with the generator's leakage check when asked for
    llm_leaks = None
    if v.llm_leakage_check:
        checked = [q for q in queries if q.get("decision") != "removed" and q.get("neutral_query")]
        leak_asks = {
            q["candidate_id"]: make_ask(
                identity,
                structured,
                "leakage_check",
                q["domain"],
                q["persona_id"],
                P.leakage_messages(q["neutral_query"]),
            )
            for q in checked
        }
        leak_stage = run_asks(warehouse, cfg, list(leak_asks.values()), backend)
        report.stages["leakage_check"] = _stage_counts(leak_stage)
        llm_leaks = {
            cid: P.parse_leakage(leak_stage.answers[a.key])
            for cid, a in leak_asks.items()
            if a.key in leak_stage.answers
        }
    validate_queries(queries, similarity=v.query_similarity, phrases=phrases, llm_leaks=llm_leaks)
    report.stages["queries"] = _stage_counts(stage, queries)
    log(f"queries: {report.stages['queries']}")

    landing.record_build(warehouse, build_row(cfg), domain_rows(cfg), personas + queries)
    if cfg.review == "skip":
        publish(warehouse, qs)
        report.published = True
    return report


def build_row(cfg: BuildConfig) -> dict[str, Any]:
    return {
        "query_set": cfg.query_set,
        "name": cfg.name,
        "version": cfg.version,
        "config_json": cfg.stored_json(),
        "generator_model": cfg.generator.model,
        "generator_revision": model_fingerprint(cfg.generator.model, cfg.generator.revision),
        "backend": cfg.generator.backend,
        "prompt_version": P.PROMPT_VERSION,
        "seed": cfg.generator.decoding.seed,
        "status": "validated",
        "published_at": None,
    }


def domain_rows(cfg: BuildConfig) -> list[dict[str, Any]]:
    return [{"domain_id": d.id, "description": d.description} for d in cfg.domains]


# --------------------------------------------------------------------------- publishing


def build_config(warehouse: str | Path, query_set: str) -> BuildConfig:
    """The config a landed build was made with."""
    from ableaudit.queryset.config import parse_build_config

    rows = landing.read_table(warehouse, "queryset_builds", query_set)
    if not rows:
        raise QuerySetBuildError(
            f"no query set {query_set!r} has been built in {warehouse}; "
            "run `ableaudit queryset build --config FILE` first"
        )
    return parse_build_config(json.loads(rows[0]["config_json"]), f"build {query_set}")


def final_queries(warehouse: str | Path, query_set: str) -> list[dict[str, Any]]:
    """The queries that pass validation, with the review's decisions applied (rejected ones
    left out, edited ones as edited)."""
    candidates = landing.read_table(warehouse, "queryset_candidates", query_set)
    reviews = {
        r["candidate_id"]: r for r in landing.read_table(warehouse, "queryset_reviews", query_set)
    }
    out = []
    for c in sorted(candidates, key=lambda c: (c["domain"], c["candidate_id"])):
        if c["stage"] != "queries" or c["decision"] != "kept":
            continue
        r = reviews.get(c["candidate_id"])
        if r is not None and r["decision"] == "reject":
            continue
        if r is not None:
            c = {
                **c,
                "neutral_query": r["neutral_query"],
                "disability_template": r["disability_template"],
            }
        out.append(c)
    return out


def publish(warehouse: str | Path, query_set: str) -> int:
    """Stage 6: the set's final queries, each as a neutral prompt and one prompt per category,
    land in raw.external_queries under ``query_set``; returns the number of prompts."""
    cfg = build_config(warehouse, query_set)
    cats = taxonomy(cfg)
    prompts = []
    for q in final_queries(warehouse, query_set):
        base = {
            "query_set": query_set,
            "query_id": q["candidate_id"],
            "domain": q["domain"],
            "persona": q["persona"],
        }
        prompts.append({**base, "disability_id": None, "prompt_text": q["neutral_query"]})
        for c in cats:
            text = q["disability_template"].replace(P.PLACEHOLDER, c["query_phrase"])
            prompts.append({**base, "disability_id": c["disability_id"], "prompt_text": text})
    if not prompts:
        raise QuerySetBuildError(
            f"query set {query_set} has no query left to publish (see queryset_funnel for why); "
            "build with more personas, another generator or looser settings"
        )
    landing.publish_query_set(warehouse, query_set, prompts)
    return len(prompts)
