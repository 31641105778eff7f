"""The drill-down: the pairs behind every shaded cell, one page per model.

A page holds one model's pairs of one task and query set, every arm, side by
side: the neutral and the disability-aware prompt and answer, each metric's two
scores and whether the pair counts as degraded, and each contrastive judge's
verdict with the spans it quoted marked in the answer. A cell of a shaded table
links to its model's page with the cell's filters in the address
(``#arm=baseline&disability=vision``); the page's filters (arm, domain,
disability, outcome, free text) work from the keyboard and, without a script,
every pair is simply shown.

At most ``max_pairs`` pairs per arm are written, spread evenly over the
domain x disability cells (round robin in pair_id order, a stable pseudo-random
order); the page says how many pairs each arm has in all.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pandas as pd

from ableaudit.report import format as fmt
from ableaudit.report.marts import Marts
from ableaudit.report.records import Source
from ableaudit.report.tables import Names

DEFAULT_MAX_PAIRS = 300


def slug(task: str, query_set: str, model_id: str) -> str:
    """A file name for a model's page: readable, and unique even when names differ only in punctuation."""
    readable = re.sub(r"[^a-z0-9]+", "-", f"{task}-{query_set}-{model_id}".lower()).strip("-")[:60]
    digest = hashlib.sha256(f"{task}\0{query_set}\0{model_id}".encode()).hexdigest()[:8]
    return f"{readable}-{digest}"


def anchor(generation_id: str) -> str:
    """The id of a pair's article, from its disability-aware generation."""
    return "g-" + generation_id[:16]


@dataclass
class Span:
    """A stretch of the disability-aware answer that a judge quoted."""

    start: int
    """Offset of the first character."""
    end: int
    """Offset after the last character."""
    labels: list[str] = field(default_factory=list)
    """Which judge and dimension quoted it ('j1: stereotype')."""


@dataclass
class Piece:
    """A run of answer text, marked or not."""

    text: str
    """The text."""
    mark: str | None = None
    """For a quoted span: who quoted it, read out before the span."""


@dataclass
class Verdict:
    """One contrastive judge's verdict on a pair."""

    judge: str
    """The judge's name."""
    status: str
    """parsed | repaired | unparseable | call_error | not judged."""
    counted: bool
    """The verdict counts in interpretive_shift."""
    labels: list[tuple[str, str]]
    """(dimension, label) for each dimension of the judge's set the pair counts in: interpret,
    stereotype, framing and abstain (B declines), or those of its own set."""
    reason: str | None
    """Why the verdict is not counted."""
    differences: str | None
    """The judge's own words on how the answers differ."""


@dataclass
class Score:
    """One metric's scores of a pair."""

    metric: str
    """Metric id."""
    label: str
    """Its display name."""
    neutral: tuple[str, Source | None]
    """The neutral answer's score, formatted, with its provenance."""
    disability: tuple[str, Source | None]
    """The disability-aware answer's score."""
    outcome: str
    """'degraded', 'not degraded' or why the pair is not counted."""


@dataclass
class Pair:
    """A pair as the page shows it."""

    anchor: str
    """Its article id."""
    arm: str
    """Arm."""
    domain: str
    """Domain (for vision, the image category)."""
    disability: str
    """Disability category of the prompt."""
    query_id: str
    """Query (or image) id."""
    temperature: str
    """Sampling temperature, formatted."""
    sample: str
    """Sample index."""
    status: str
    """int_pairs.pair_status."""
    identity: str | None
    """For a picture: the gender and race of the person pictured."""
    neutral_prompt: str
    """The neutral prompt."""
    neutral_answer: str
    """The neutral answer (or its status when there is none)."""
    disability_prompt: str
    """The disability-aware prompt."""
    disability_answer: list[Piece]
    """The disability-aware answer, in pieces, quoted spans marked."""
    scores: list[Score]
    """Each metric's scores."""
    verdicts: list[Verdict]
    """Each contrastive judge's verdict."""
    outcomes: str
    """Space-separated filter tokens: 'degraded:<metric>', 'yes:<dimension>:<judge>'."""
    disability_label: str | None = None
    """The disability's display name (the id when None)."""


@dataclass
class ModelPage:
    """One model's evidence page."""

    task: str
    """'text' or 'vision'."""
    query_set: str
    """Query or image set."""
    model_id: str
    """Model."""
    path: str
    """Relative path under the report folder."""
    pairs: list[Pair]
    """The pairs written."""
    totals: list[tuple[str, str, Source, int]]
    """Per arm: (arm, total formatted, its provenance, how many are shown)."""
    arms: list[str]
    """Arms, baseline first (filter options)."""
    domains: list[str]
    """Domains (filter options)."""
    disabilities: list[tuple[str, str]]
    """(id, display name) of the disabilities (filter options)."""
    outcomes: list[tuple[str, str]]
    """(token, label) filter options."""
    siblings: list[tuple[str, str]] = field(default_factory=list)
    """(model_id, path) of the other models' pages of the same task and query set."""
    key: str | None = None
    """The digest of everything its main part is made from (``page_keys``); None when it
    cannot be told (a live warehouse, a picture set), and the page is always made anew."""
    kept: Kept | None = None
    """The main part of the previous report's page of the same key, written again as it was;
    ``pairs`` and the other fields of the main part are then left empty."""

    @property
    def anchors(self) -> set[str]:
        """The ids of the pairs on the page."""
        return self.kept.anchors if self.kept is not None else {x.anchor for x in self.pairs}


@dataclass(frozen=True)
class Kept:
    """The main part of an evidence page, as the previous report wrote it."""

    main: str
    """Its HTML."""
    provenance: str
    """The JSON list of its figures' keys (``records.Provenance``)."""
    anchors: set[str]
    """The ids of its pairs."""


def split_answer(text: str, spans: list[tuple[str, str]]) -> list[Piece]:
    """The answer in pieces, each quoted span marked once (overlapping quotes merged)."""
    found: list[Span] = []
    lowered = text.lower()
    for label, quote in spans:
        quote = (quote or "").strip()
        if not quote:
            continue
        at = text.find(quote)
        if at < 0:
            at = lowered.find(quote.lower())
        if at < 0:
            continue
        found.append(Span(at, at + len(quote), [label]))
    found.sort(key=lambda s: (s.start, -s.end))
    merged: list[Span] = []
    for s in found:
        if merged and s.start < merged[-1].end:
            merged[-1].end = max(merged[-1].end, s.end)
            merged[-1].labels += [x for x in s.labels if x not in merged[-1].labels]
        else:
            merged.append(s)
    pieces, pos = [], 0
    for s in merged:
        if s.start > pos:
            pieces.append(Piece(text[pos : s.start]))
        pieces.append(Piece(text[s.start : s.end], "quoted by " + "; ".join(sorted(s.labels))))
        pos = s.end
    if pos < len(text):
        pieces.append(Piece(text[pos:]))
    return pieces


_PAIRS_SQL = """
with pairs as (
    select *,
        row_number() over (
            partition by task, query_set, model_id, arm, domain, disability_id order by pair_id
        ) as rank_in_cell
    from int_pairs {scope}
),
chosen as (
    select * from pairs
    qualify row_number() over (
        partition by task, query_set, model_id, arm order by rank_in_cell, domain, disability_id, pair_id
    ) <= ?
)
select
    chosen.task, chosen.query_set, chosen.model_id, chosen.pair_id, chosen.arm, chosen.query_id, chosen.domain, chosen.disability_id, chosen.temperature,
    chosen.sample_index, chosen.pair_status, chosen.neutral_generation_id, chosen.disability_generation_id,
    neutral.prompt_text as neutral_prompt, neutral.response_text as neutral_answer, neutral.status as neutral_status,
    disability.prompt_text as disability_prompt, disability.response_text as disability_answer,
    disability.status as disability_status
from chosen
left join stg_raw__generations as neutral on neutral.generation_id = chosen.neutral_generation_id
left join stg_raw__generations as disability on disability.generation_id = chosen.disability_generation_id
order by chosen.task, chosen.query_set, chosen.model_id,
    chosen.arm, chosen.domain, chosen.disability_id, chosen.query_id, chosen.temperature, chosen.sample_index
"""


PageKey = tuple[str, str, str]
"""(task, query_set, model_id) of an evidence page."""

_PAGE_RELATIONS = ("int_pairs", "stg_raw__generations", "int_pair_scores", "int_pair_judgments")
"""The relations a text page reads, each by model (``model_id``)."""


def page_keys(marts: Marts, pages: list[PageKey], max_pairs: int, code: str) -> dict[PageKey, str]:
    """The digest of what each text page's main part is made from: ``code`` (the report's
    own), ``max_pairs``, and the model's rows of every relation it reads, by the
    fingerprints the publish recorded (``publish.relation_groups``: rows, sum and exclusive
    or of their hashes) and, for the judges' parsed verdicts, one read of those rows.

    Empty when the warehouse is not a published copy (no fingerprints); a picture set's pages
    (which read ``stg_raw__images``, not by model) get none."""
    ((fingerprinted,),) = marts.con.execute(
        "select count(*) from duckdb_tables() where database_name = current_database() "
        "and schema_name = 'publish' and table_name = 'relation_groups'"
    ).fetchall()
    if not fingerprinted:
        return {}
    recorded: dict[tuple[str, str | None], tuple] = {
        (name, value): (n, str(total), xor)
        for name, value, n, total, xor in marts.con.execute(
            "select relation_name, group_value, n_rows, hash_sum, hash_xor from publish.relation_groups "
            "where schema_name = 'main' and list_contains(?, relation_name)",
            [list(_PAGE_RELATIONS)],
        ).fetchall()
    }
    held = {name for name, _ in recorded}
    for r in _PAGE_RELATIONS:
        # a relation the copy holds rows of but recorded no fingerprints for
        if marts.has(r) and r not in held and len(marts.query(f'select 1 from "{r}" limit 1')):
            return {}
    verdicts: dict[str, tuple] = {}
    if marts.has("int_pair_judgments") and marts.has("stg_raw__judgments"):
        verdicts = {
            model: (n, str(total))
            for model, n, total in marts.con.execute(
                "select j.model_id, count(*), sum(hash(j.judgment_id, s.parsed_json)) "
                "from int_pair_judgments j left join stg_raw__judgments s using (judgment_id) "
                "group by j.model_id"
            ).fetchall()
        }
    out = {}
    for task, query_set, model_id in pages:
        if task != "text":
            continue
        parts = [code, max_pairs, task, query_set, model_id, verdicts.get(model_id)]
        parts += [recorded.get((r, model_id)) for r in _PAGE_RELATIONS]
        out[(task, query_set, model_id)] = hashlib.sha256(
            json.dumps(parts, default=str).encode()
        ).hexdigest()
    return out


def model_pages(
    marts: Marts,
    max_pairs: int = DEFAULT_MAX_PAIRS,
    code: str | None = None,
    previous: Callable[[str], Kept | None] | None = None,
) -> list[ModelPage]:
    """Every model's page; empty when the warehouse has no int_pairs to read.

    With ``code`` (the digest of the report's own code) and ``previous`` (the main part of
    the previous report's page of a key, if it has one), a page whose key (``page_keys``)
    the previous report has keeps its main part, and its pairs are not read."""
    if not (marts.has("int_pairs") and marts.has("stg_raw__generations")):
        return []
    units = marts.query(
        "select task, query_set, model_id, arm, count(*) as n from int_pairs "
        "group by all order by task, query_set, model_id, arm"
    )
    keys = ["task", "query_set", "model_id"]
    wanted: list[PageKey] = sorted(set(units[keys].itertuples(index=False, name=None)))
    names = Names(marts)
    if code is not None:  # a page prints the display names: other names, a page made anew
        code += hashlib.sha256(json.dumps([names.metrics, names.disabilities]).encode()).hexdigest()
    page_key = page_keys(marts, wanted, max_pairs, code) if code is not None else {}
    kept = {}
    if previous is not None:
        for unit, key in page_key.items():
            if (found := previous(key)) is not None:
                kept[unit] = found
    # every model's shown pairs, their scores and their verdicts in one read each, not one per model
    if not kept:
        pairs = marts.query(_PAIRS_SQL.format(scope=""), [max_pairs])
    else:
        marts.con.register(
            "report_wanted_pages",
            pd.DataFrame([u for u in wanted if u not in kept], columns=keys, dtype=object),
        )
        try:
            pairs = marts.query(
                _PAIRS_SQL.format(
                    scope="semi join report_wanted_pages using (task, query_set, model_id)"
                ),
                [max_pairs],
            )
        finally:
            marts.con.unregister("report_wanted_pages")
    marts.con.register("report_chosen_pairs", pairs[["pair_id"]])
    try:
        scores = (
            marts.query(
                "select s.pair_id, s.metric, s.neutral_score, s.disability_score, s.degraded, s.included, s.exclusion_reason "
                "from int_pair_scores s join report_chosen_pairs c using (pair_id) order by s.pair_id, s.metric"
            )
            if marts.has("int_pair_scores")
            else pd.DataFrame()
        )
        verdicts = (
            marts.query(
                "select j.pair_id, j.judge_name, j.verdict_status, j.included, j.exclusion_reason, "
                "s.parsed_json from int_pair_judgments j "
                "join report_chosen_pairs c using (pair_id) left join stg_raw__judgments s using (judgment_id) "
                "order by j.pair_id, j.judge_name"
            )
            if marts.has("int_pair_judgments") and marts.has("stg_raw__judgments")
            else pd.DataFrame()
        )
        answers = (
            marts.query(
                "select d.pair_id, d.judge_name, d.dimension, d.label, d.is_flagged "
                "from int_pair_dimension_labels d join report_chosen_pairs c using (pair_id) "
                "where d.included order by d.pair_id, d.judge_name, d.dimension_position, d.dimension"
            )
            if marts.has("int_pair_dimension_labels")
            else pd.DataFrame()
        )
    finally:
        marts.con.unregister("report_chosen_pairs")
    score_map: dict[str, list] = {}
    for r in scores.itertuples():
        score_map.setdefault(r.pair_id, []).append(r)
    labelled: dict[tuple[str, str], list] = {}
    for r in answers.itertuples():
        labelled.setdefault((r.pair_id, r.judge_name), []).append(r)
    verdict_map: dict[str, list] = {}
    for r in verdicts.itertuples():
        verdict_map.setdefault(r.pair_id, []).append(
            (r, labelled.get((r.pair_id, r.judge_name), []))
        )
    shown = {key: g for key, g in pairs.groupby(keys, sort=False, dropna=False)}
    pages = []
    for (task, query_set, model_id), g in units.groupby(keys, sort=True):
        unit = (task, query_set, model_id)
        if unit in kept:
            path = f"evidence/{slug(task, query_set, model_id)}.html"
            pages.append(
                ModelPage(task, query_set, model_id, path, [], [], [], [], [], [], kept=kept[unit])
            )
        else:
            chosen = shown.get(unit, pairs.iloc[0:0])
            pages.append(
                _page(marts, task, query_set, model_id, g, chosen, score_map, verdict_map, names)
            )
        pages[-1].key = page_key.get(unit)
    by_set: dict[tuple[str, str], list[ModelPage]] = {}
    for p in pages:
        by_set.setdefault((p.task, p.query_set), []).append(p)
    for group in by_set.values():
        for p in group:
            p.siblings = [(o.model_id, o.path) for o in group]
    return pages


def _arms(values: Any) -> list[str]:
    vals = sorted(set(values))
    return (["baseline"] if "baseline" in vals else []) + [v for v in vals if v != "baseline"]


def _page(
    marts: Marts,
    task: str,
    query_set: str,
    model_id: str,
    units: pd.DataFrame,
    pairs: pd.DataFrame,
    score_map: dict[str, list],
    verdict_map: dict[str, list],
    names: Names,
) -> ModelPage:
    """One model's page: its shown ``pairs``, with the score and verdict rows of every shown
    pair (of every model) by pair id."""
    identity = {}
    if task == "vision" and marts.has("stg_raw__images"):
        images = marts.query(
            "select image_id, gender, race from stg_raw__images where image_set = ?", [query_set]
        )
        identity = {r.image_id: f"{r.gender}, {r.race}" for r in images.itertuples()}
    metrics, dims = set(), set()
    out = []
    for r in pairs.itertuples():
        tokens, score_rows, verdict_rows, spans = [], [], [], []
        for s in score_map.get(r.pair_id, []):
            k = {"pair_id": r.pair_id, "metric": s.metric}
            # every scored metric is an outcome to filter on (a cell's link names its metric)
            metrics.add(s.metric)
            if s.included:
                outcome = "degraded" if s.degraded else "not degraded"
                if s.degraded:
                    tokens.append(f"degraded:{s.metric}")
            else:
                outcome = f"not counted: {s.exclusion_reason}"
            score_rows.append(
                Score(
                    s.metric,
                    names.metric(s.metric),
                    (fmt.number(s.neutral_score, 3), Source("int_pair_scores", "neutral_score", k)),
                    (
                        fmt.number(s.disability_score, 3),
                        Source("int_pair_scores", "disability_score", k),
                    ),
                    outcome,
                )
            )
        for v, answered in verdict_map.get(r.pair_id, []):
            parsed = json.loads(v.parsed_json) if isinstance(v.parsed_json, str) else {}
            labels = []
            if v.included:
                # every dimension of the judge's set, in the set's order (int_pair_dimension_labels)
                for a in answered:
                    labels.append((a.dimension, a.label))
                    dims.add((a.dimension, v.judge_name))
                    if a.is_flagged:
                        tokens.append(f"yes:{a.dimension}:{v.judge_name}")
                    spans += [
                        (f"{v.judge_name}, {a.dimension}", q)
                        for q in parsed.get(f"{a.dimension}_spans") or []
                    ]
            verdict_rows.append(
                Verdict(
                    v.judge_name,
                    v.verdict_status if not fmt.missing(v.verdict_status) else "not judged",
                    bool(v.included),
                    labels,
                    None if fmt.missing(v.exclusion_reason) else str(v.exclusion_reason),
                    parsed.get("content_differences") or None,
                )
            )
        answer = r.disability_answer if isinstance(r.disability_answer, str) else None
        out.append(
            Pair(
                anchor=anchor(r.disability_generation_id),
                arm=r.arm,
                domain=r.domain,
                disability=r.disability_id,
                disability_label=names.disability(r.disability_id),
                query_id=r.query_id,
                temperature=fmt.threshold(r.temperature),
                sample=fmt.count(r.sample_index),
                status=r.pair_status,
                identity=identity.get(r.query_id),
                neutral_prompt=r.neutral_prompt
                if isinstance(r.neutral_prompt, str)
                else "(no neutral prompt landed)",
                neutral_answer=_answer_text(r.neutral_answer, r.neutral_status),
                disability_prompt=r.disability_prompt
                if isinstance(r.disability_prompt, str)
                else "",
                disability_answer=split_answer(answer, spans)
                if answer and answer.strip()
                else [Piece(_answer_text(r.disability_answer, r.disability_status))],
                scores=score_rows,
                verdicts=verdict_rows,
                outcomes=" ".join(tokens),
            )
        )
    totals = []
    for u in units.itertuples():
        shown = int((pairs.arm == u.arm).sum())
        totals.append(
            (
                u.arm,
                fmt.count(u.n),
                Source(
                    "int_pairs",
                    "pair_id",
                    {"task": task, "query_set": query_set, "model_id": model_id, "arm": u.arm},
                    "count",
                ),
                shown,
            )
        )
    outcomes = [(f"degraded:{m}", f"degraded on {names.metric(m)}") for m in sorted(metrics)]
    outcomes += [
        (f"yes:{d}:{j}", f"{d} labelled Yes by {j}")
        for d, j in sorted(dims, key=lambda x: (x[1], x[0]))
    ]
    return ModelPage(
        task=task,
        query_set=query_set,
        model_id=model_id,
        path=f"evidence/{slug(task, query_set, model_id)}.html",
        pairs=out,
        totals=totals,
        arms=_arms(units.arm),
        domains=sorted(pairs.domain.dropna().unique()),
        disabilities=[
            (d, names.disability(d))
            for d in names.sorted_disabilities(pairs.disability_id.dropna())
        ],
        outcomes=outcomes,
    )


def _answer_text(text: Any, status: Any) -> str:
    if isinstance(text, str) and text.strip():
        return text
    if fmt.missing(status):
        return "(no answer landed)"
    return f"(no answer: status {status})"


class Links:
    """Addresses of the evidence behind a cell, relative to the report folder."""

    def __init__(self, pages: list[ModelPage], prefix: str = "") -> None:
        self.paths = {(p.task, p.query_set, p.model_id): p.path for p in pages}
        self.anchors = {(p.task, p.query_set, p.model_id): p.anchors for p in pages}
        self.prefix = prefix

    def __call__(
        self, task: str, query_set: str, model_id: str, gen: str | None = None, **filters: str
    ) -> str | None:
        path = self.paths.get((task, query_set, model_id))
        if path is None:
            return None
        if gen is not None:
            a = anchor(gen)
            return (
                self.prefix
                + path
                + (f"#{a}" if a in self.anchors[(task, query_set, model_id)] else "")
            )
        query = urlencode({k: v for k, v in filters.items() if v is not None})
        return self.prefix + path + (f"#{query}" if query else "")
