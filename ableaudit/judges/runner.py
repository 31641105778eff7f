"""Running the judges over landed generations, content-addressed like generation.

A verdict's key (``judgment_id``) is a hash of what determines it: the judge
(backend, model fingerprint incl. revision, decoding), the prompt version, the
judge kind and the subject texts (``subject_hash``: the query and response for
the rubric judge, plus the disability for the disability-aware variant; both
questions and both responses for the contrastive judge). Consequences:

* a re-run costs nothing: keys landed with ``call_status = 'ok'`` are skipped
  before any backend is even loaded;
* an error is retried on the next run (it is never a cached result);
* two generations with identical subject texts (e.g. greedy samples) share one
  verdict. The row's ``generation_id`` (or pair ids) names the first generation
  judged with that content; marts attach the verdict to every generation with
  the same texts (see the README).

The judges never pair generations themselves: pairing is a dbt rule
(``int_pairs``), and the pairs and their texts are read from ``int_pair_texts``
(the rubric judge's generations from ``stg_raw__generations``), which
``run_judges`` builds first.

The judge target's ``system_prompt`` is not used: the judge prompts carry their
own. Its decoding applies; a temperature left unset means 0 (greedy).
The rubric judge runs on text generations (the AccessEval rubric is about
answers to questions); the contrastive judge runs on text and vision pairs.

This module wires the steps, each in a module of its own: ``items`` (keys and
items), ``subjects`` (what is judged), ``execution`` (running a judge and landing
its verdicts) and ``reparse``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ableaudit.backends.base import (
    Backend,
)
from ableaudit.config import AuditConfig, Judge
from ableaudit.judges.dimensions import dimensions_of
from ableaudit.judges.execution import JudgeReport, LazyBackend, Progress, pending_items, run_items
from ableaudit.judges.execution import judge_chunk_rows as judge_chunk_rows
from ableaudit.judges.execution import land_judged as land_judged
from ableaudit.judges.execution import progress_bars as progress_bars
from ableaudit.judges.items import KINDS, JudgeItem, contrastive_item, judge_identity, rubric_item
from ableaudit.judges.items import contrastive_subject as contrastive_subject
from ableaudit.judges.items import judgment_key as judgment_key
from ableaudit.judges.items import rubric_subject as rubric_subject
from ableaudit.judges.reparse import reparse_judgments as reparse_judgments
from ableaudit.judges.subjects import SubjectsNotBuilt as SubjectsNotBuilt
from ableaudit.judges.subjects import build_subjects, select_pairs, select_rubric_subjects


def judge_rubric(
    warehouse: str | Path,
    judge: Judge,
    backend: Backend | LazyBackend | Callable[[], Backend],
    generation_rows: Sequence[dict[str, Any]],
    run_id: str | None = None,
    progress: Progress | None = None,
) -> JudgeReport:
    """Score each generation with the AccessEval rubric (neutral or disability-aware prompt)."""
    identity = judge_identity(judge)
    items = [rubric_item(identity, r) for r in generation_rows]
    return run_items(
        warehouse, judge, backend, items, run_id, subjects=len(generation_rows), progress=progress
    )


def judge_contrastive(
    warehouse: str | Path,
    judge: Judge,
    backend: Backend | LazyBackend | Callable[[], Backend],
    pairs: Sequence[dict[str, Any]],
    run_id: str | None = None,
    progress: Progress | None = None,
) -> JudgeReport:
    """Compare each disability response (B) with its neutral response (A), on the judge's dimensions."""
    identity = judge_identity(judge)
    items = [contrastive_item(identity, p, dimensions_of(judge)) for p in pairs]
    return run_items(
        warehouse, judge, backend, items, run_id, subjects=len(pairs), progress=progress
    )


def _default_factory(judge: Judge) -> Callable[[], Backend]:
    def make() -> Backend:
        from ableaudit.backends import make_backend

        return make_backend(judge.target)

    return make


@dataclass
class JudgeJob:
    """One judge's verdicts of one kind still to obtain, and the report they add to."""

    judge: Judge
    kind: str
    todo: list[JudgeItem]
    report: JudgeReport


def _items(
    warehouse: str | Path, judge: Judge, kind: str, scope: dict[str, Any]
) -> tuple[list[JudgeItem], int]:
    """The items of ``judge`` of ``kind`` over the subjects in ``scope``, and how many subjects."""
    identity = judge_identity(judge)
    if kind == "rubric":
        rows = select_rubric_subjects(warehouse, **scope)
        return [rubric_item(identity, r) for r in rows], len(rows)
    pairs = select_pairs(warehouse, **scope)
    return [contrastive_item(identity, p, dimensions_of(judge)) for p in pairs], len(pairs)


def run_judges(
    warehouse: str | Path,
    cfg: AuditConfig,
    run_id: str | None = None,
    backend_factory: Callable[[Judge], Backend] | None = None,
    progress: Progress | None = None,
    on_cluster: Callable[[list[JudgeJob]], None] | None = None,
) -> dict[str, dict[str, dict[str, int]]]:
    """Run every judge of the config on the audit's landed generations; {judge: {kind: counts}}.

    Scope: generations of the config's query set that are 'ok', made by the
    config's targets, plus imported ones when the judge's ``include_imported``.
    A judge whose verdicts are all landed never loads its model. The models
    the judges read are built first (``build_subjects``).

    Here, each judge's model is made in this process. With ``on_cluster``, the verdicts not
    landed yet are handed to it as jobs (``JudgeJob``) instead (the audit flow's judge step on a
    Dask or Ray cluster: ``ableaudit.audit.runners.fan_out_judges``), which lands them and
    fills each job's report.
    """
    model_ids = [t.reported_model_id for t in cfg.targets]
    if cfg.judges:
        build_subjects(warehouse)
    out: dict[str, dict[str, dict[str, int]]] = {}
    jobs: list[JudgeJob] = []
    claimed: set[str] = set()
    for judge in cfg.judges:
        kinds = [k for k in KINDS if k in judge.kinds]
        scope = dict(
            query_set=cfg.query_set, model_ids=model_ids, include_imported=judge.include_imported
        )
        out[judge.name] = {}
        if on_cluster is not None:
            for kind in kinds:
                items, subjects = _items(warehouse, judge, kind, scope)
                todo, report = pending_items(warehouse, items, subjects)
                # a verdict an earlier job asks for (a judge of the same model, prompt and
                # decoding) is asked once, as here, where the later judge finds it landed
                shared = [it for it in todo if it.judgment_id in claimed]
                report.cached += len(shared)
                todo = [it for it in todo if it.judgment_id not in claimed]
                claimed.update(it.judgment_id for it in todo)
                jobs.append(JudgeJob(judge, kind, todo, report))
            continue
        factory = (
            (lambda j=judge: backend_factory(j)) if backend_factory else _default_factory(judge)
        )
        lazy = LazyBackend(factory)
        try:
            for kind in kinds:
                items, subjects = _items(warehouse, judge, kind, scope)
                out[judge.name][kind] = run_items(
                    warehouse, judge, lazy, items, run_id, subjects, progress
                ).as_dict()
        finally:
            lazy.close()
    if on_cluster is not None:
        on_cluster(jobs)
        for job in jobs:
            out[job.judge.name][job.kind] = job.report.as_dict()
    return out


def with_vision_judges(
    cfg: AuditConfig, judge: Callable[[AuditConfig], dict[str, Any]]
) -> dict[str, Any]:
    """``judge(cfg)``, then, with vision targets, ``judge`` on the vision pairs (they live
    under the image set's name), their counts under ``"<judge> (vision)"``."""
    counts = judge(cfg)
    if cfg.vision_targets:
        vision = judge(cfg.model_copy(update={"query_set": cfg.vision.image_set}))
        counts.update({f"{k} (vision)": v for k, v in vision.items()})
    return counts
