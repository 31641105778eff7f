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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ibis
import ibis.expr.types as ir
from ibis.common.exceptions import TableNotFound

from ableaudit.backends.base import (
    Backend,
    GenerationCancelled,
    GenerationRequest,
    GenerationResult,
    results_in_batches,
)
from ableaudit.config import AuditConfig, Judge
from ableaudit.judges.parsing import Verdict, parse_verdict
from ableaudit.judges.prompts import contrastive_messages, rubric_messages
from ableaudit.judges.schemas import decoding_schema
from ableaudit.keys import content_key, model_fingerprint
from ableaudit.warehouse import connect, ibis_compat, warehouse_path
from ableaudit.warehouse.landing import land_judgments, landed_judgment_keys, update_judgment_parses

KINDS = ("rubric", "contrastive")


# --------------------------------------------------------------------------- keys and items


def judge_identity(judge: Judge) -> dict[str, Any]:
    """Everything about the judge that determines its verdicts (its name does not)."""
    t = judge.target
    d = t.decoding
    identity: dict[str, Any] = {
        "backend": t.backend,
        "model": model_fingerprint(t.model, t.revision),
        "adapter": model_fingerprint(t.adapter) if t.adapter else None,
        "decoding": {
            "temperature": 0.0 if d.temperature is None else d.temperature,
            "top_p": d.top_p,
            "max_new_tokens": d.max_new_tokens,
            "seed": d.seed,
        },
    }
    if judge.structured:
        # constrained decoding changes the verdicts: keys of their own, tied to the schemas decoded against
        # (free-text keys stay as they were; a change of decoding_schema judges again)
        identity["structured_output"] = content_key({k: decoding_schema(k) for k in KINDS})
    return identity


def judgment_key(
    identity: dict[str, Any], kind: str, prompt_version: str, subject_hash: str
) -> str:
    return content_key(
        {
            "judge": identity,
            "kind": kind,
            "prompt_version": prompt_version,
            "subject_hash": subject_hash,
        }
    )


def rubric_subject(query: str, response: str, disability: str | None) -> dict[str, Any]:
    return {"query": query, "response": response, "disability": disability}


def contrastive_subject(
    question_a: str, response_a: str, question_b: str, response_b: str
) -> dict[str, Any]:
    return {
        "question_a": question_a,
        "response_a": response_a,
        "question_b": question_b,
        "response_b": response_b,
    }


@dataclass(frozen=True)
class JudgeItem:
    """One verdict to obtain: its key, its prompt and the generations it is about."""

    judgment_id: str
    kind: str
    prompt_version: str
    subject_hash: str
    messages: tuple[dict, ...]
    nonce: str
    generation_id: str | None = None
    neutral_generation_id: str | None = None
    disability_generation_id: str | None = None
    response_b: str | None = None


def rubric_item(identity: dict[str, Any], row: dict[str, Any]) -> JudgeItem:
    """The rubric verdict for one generation row (prompt_text, response_text, condition, disability)."""
    disability = None
    if row.get("condition") == "disability" or row.get("disability_id"):
        disability = row.get("disability_label") or row.get("disability_id")
        if not disability:
            raise ValueError(
                f"generation {row.get('generation_id')} is disability-aware but names no disability"
            )
    subject = rubric_subject(row["prompt_text"], row["response_text"], disability)
    tpl, nonce, messages = rubric_messages(subject["query"], subject["response"], disability)
    subject_hash = content_key(subject)
    return JudgeItem(
        judgment_id=judgment_key(identity, "rubric", tpl.prompt_version, subject_hash),
        kind="rubric",
        prompt_version=tpl.prompt_version,
        subject_hash=subject_hash,
        messages=messages,
        nonce=nonce,
        generation_id=row["generation_id"],
    )


def contrastive_item(identity: dict[str, Any], pair: dict[str, Any]) -> JudgeItem:
    """The contrastive verdict for one (neutral, disability) pair."""
    subject = contrastive_subject(
        pair["question_a"], pair["response_a"], pair["question_b"], pair["response_b"]
    )
    tpl, nonce, messages = contrastive_messages(**subject)
    subject_hash = content_key(subject)
    return JudgeItem(
        judgment_id=judgment_key(identity, "contrastive", tpl.prompt_version, subject_hash),
        kind="contrastive",
        prompt_version=tpl.prompt_version,
        subject_hash=subject_hash,
        messages=messages,
        nonce=nonce,
        neutral_generation_id=pair["neutral_generation_id"],
        disability_generation_id=pair["disability_generation_id"],
        response_b=pair["response_b"],
    )


# --------------------------------------------------------------------------- subjects (read from the warehouse)

#: The models the judges read, and everything upstream of them: the judge step builds them first.
SUBJECT_MODELS = "+int_pair_texts"


class SubjectsNotBuilt(RuntimeError):
    """The warehouse lacks the models the judges read; the message says how to build them."""


def build_subjects(warehouse: str | Path) -> None:
    """Build the models the judges read (stg_raw__generations, int_pairs, int_pair_texts).

    Pairing is a dbt rule (int_pairs); the judges read its result rather than
    pairing generations themselves, so a judge step that runs before the full
    warehouse build builds these first. They are incremental tables
    (docs/incremental.md): a generation landed after this build is paired at the next one,
    so build them again after landing and before selecting what to judge.
    """
    from ableaudit.build import build_selected

    build_selected(warehouse, [SUBJECT_MODELS])


def _open(warehouse: str | Path) -> ibis.BaseBackend:
    path = warehouse_path(warehouse)
    connect(
        path
    ).close()  # a fresh file gets its raw schema; then read without holding a write lock
    return ibis_compat.connect(path, read_only=True)


def _model(con: ibis.BaseBackend, name: str, warehouse: str | Path) -> ir.Table:
    try:
        return con.table(name)
    except TableNotFound:
        raise SubjectsNotBuilt(
            f"the warehouse {warehouse_path(warehouse)} has no {name}; build what the judges read first: "
            f"`dbt build --select {SUBJECT_MODELS}` (ableaudit.judges.runner.build_subjects; `ableaudit judge` does it)"
        ) from None


def _in_scope(
    source: ir.Column, model_id: ir.Column, model_ids: Iterable[str] | None, include_imported: bool
) -> ir.BooleanColumn:
    """A generation the judges judge: one the audit made (of ``model_ids``), or an imported one when allowed."""
    generated = source != "imported"
    if model_ids is not None:
        generated = generated & model_id.isin(list(model_ids))
    return (generated | (source == "imported")) if include_imported else generated


def _disability_labels(con: ibis.BaseBackend) -> dict[str, str]:
    # (not con.list_tables(): ibis 12 trips over duckdb 2.0's connection API there)
    try:
        seeds = con.table("stg_seeds__disabilities")
    except TableNotFound:
        return {}
    t = seeds.select("disability_id", "display_name").to_pyarrow().to_pylist()
    return {r["disability_id"]: r["display_name"] for r in t if r["display_name"]}


def select_rubric_subjects(
    warehouse: str | Path,
    *,
    query_set: str | None = None,
    model_ids: Iterable[str] | None = None,
    include_imported: bool = True,
) -> list[dict[str, Any]]:
    """Text generations with status 'ok' (stg_raw__generations), with the query they answer and the disability's name.

    Reads the same staged generations int_pairs pairs, so both kinds of judge
    see one version of the landed rows; build them first (``build_subjects``).
    """
    con = _open(warehouse)
    try:
        g = _model(con, "stg_raw__generations", warehouse)
        g = g.filter(
            (g.status == "ok")
            & (g.task == "text")
            & _in_scope(g.source, g.model_id, model_ids, include_imported)
        )
        if query_set is not None:
            g = g.filter(g.query_set == query_set)
        rows = (
            g.select(
                "generation_id",
                "model_id",
                "arm",
                "query_set",
                "query_id",
                "condition",
                "disability_id",
                "prompt_text",
                "response_text",
                "source",
            )
            .order_by(
                [
                    "model_id",
                    "arm",
                    "query_set",
                    "query_id",
                    "condition",
                    "disability_id",
                    "generation_id",
                ]
            )
            .to_pyarrow()
            .to_pylist()
        )
        labels = _disability_labels(con)
    finally:
        con.disconnect()
    for r in rows:
        r["disability_label"] = (
            labels.get(r["disability_id"], r["disability_id"]) if r["disability_id"] else None
        )
    return rows


def select_pairs(
    warehouse: str | Path,
    *,
    query_set: str | None = None,
    model_ids: Iterable[str] | None = None,
    include_imported: bool = True,
) -> list[dict[str, Any]]:
    """The complete pairs of int_pairs (both sides 'ok'), with their texts from int_pair_texts.

    Pairing is int_pairs' rule, never redone here; build the models first
    (``build_subjects``). Both sides must be in scope. The texts are returned
    as the contrastive judge names them: question_a / response_a (neutral),
    question_b / response_b (disability-aware).
    """
    con = _open(warehouse)
    try:
        p = _model(con, "int_pair_texts", warehouse)
        p = p.filter(
            (p.pair_status == "complete")
            & _in_scope(p.neutral_source, p.model_id, model_ids, include_imported)
            & _in_scope(p.disability_source, p.model_id, model_ids, include_imported)
        )
        if query_set is not None:
            p = p.filter(p.query_set == query_set)
        pairs = p.select(
            "pair_id",
            "neutral_generation_id",
            "disability_generation_id",
            "task",
            "model_id",
            "arm",
            "query_set",
            "query_id",
            "disability_id",
            "temperature",
            "sample_index",
            question_a=p.neutral_prompt_text,
            response_a=p.neutral_response_text,
            question_b=p.disability_prompt_text,
            response_b=p.disability_response_text,
        )
        rows = (
            pairs.order_by(
                [
                    "model_id",
                    "arm",
                    "query_set",
                    "query_id",
                    "disability_id",
                    "sample_index",
                    "neutral_generation_id",
                    "disability_generation_id",
                ]
            )
            .to_pyarrow()
            .to_pylist()
        )
    finally:
        con.disconnect()
    return rows


# --------------------------------------------------------------------------- running


class LazyBackend:
    """Make the judge's backend only when there is something to judge, once."""

    def __init__(self, factory: Callable[[], Backend]) -> None:
        self._factory = factory
        self._backend: Backend | None = None

    @property
    def started(self) -> bool:
        return self._backend is not None

    def get(self) -> Backend:
        if self._backend is None:
            self._backend = self._factory()
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


@dataclass
class JudgeReport:
    subjects: int = 0  # generations or pairs offered
    verdicts: int = 0  # distinct keys among them (identical texts share one)
    cached: int = 0  # already landed with call_status 'ok': no call
    called: int = 0  # judge calls made
    inserted: int = 0
    retried: int = 0  # error rows replaced
    parsed: int = 0
    repaired: int = 0
    unparseable: int = 0
    errors: int = 0  # failed calls (landed as call_status 'error', retried next run)
    spans_not_found: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    def add(self, other: JudgeReport) -> None:
        """Add the counts of ``other`` (a batch, a chunk) to these."""
        for name, value in other.__dict__.items():
            setattr(self, name, getattr(self, name) + value)


def _result_row(
    item: JudgeItem,
    judge: Judge,
    revision: str | None,
    result: GenerationResult,
    run_id: str | None,
) -> tuple[dict[str, Any], Verdict | None]:
    row: dict[str, Any] = {
        "judgment_id": item.judgment_id,
        "judge_kind": item.kind,
        "judge_name": judge.name,
        "judge_model": judge.target.model,
        "judge_revision": revision,
        "prompt_version": item.prompt_version,
        "generation_id": item.generation_id,
        "neutral_generation_id": item.neutral_generation_id,
        "disability_generation_id": item.disability_generation_id,
        "subject_hash": item.subject_hash,
        "source": "judged",
        "run_id": run_id,
    }
    if result.status == "error":
        row.update(
            call_status="error",
            raw_output=None,
            parse_status=None,
            parsed_json=None,
            parse_notes=None,
            error_message=result.error,
        )
        return row, None
    text = result.text or ""
    verdict = parse_verdict(item.kind, text, item.response_b)
    if result.finish_reason == "length":
        verdict.notes.append(
            "judge_truncated: the judge stopped at max_new_tokens; raise the judge's decoding.max_new_tokens"
        )
    row.update(
        call_status="ok",
        raw_output=text,
        parse_status=verdict.parse_status,
        parsed_json=verdict.parsed_json,
        parse_notes=verdict.notes_json,
        error_message=None,
    )
    return row, verdict


Progress = Callable[[str, str, int, int], None]  # (judge name, kind, verdicts done, verdicts to do)


@contextmanager
def progress_bars(log: Callable[[str], None] | None = None) -> Iterator[Progress]:
    """A Progress that draws one tqdm bar per judge and kind (and logs each landed chunk with ``log``)."""
    from tqdm import tqdm

    bars: dict[tuple[str, str], Any] = {}

    def progress(judge_name: str, kind: str, done: int, todo: int) -> None:
        bar = bars.get((judge_name, kind))
        if (
            bar is None or done == 0
        ):  # a new run of this judge and kind (e.g. text pairs, then vision pairs)
            if bar is not None:
                bar.close()
            bar = bars[(judge_name, kind)] = tqdm(
                total=todo, desc=f"{judge_name} {kind}", unit="verdict"
            )
            if log:
                log(f"judge {judge_name}, {kind}: {todo} verdicts to obtain")
        bar.update(done - bar.n)
        if done and log:
            log(f"judge {judge_name}, {kind}: {done}/{todo} landed")

    try:
        yield progress
    finally:
        for bar in bars.values():
            bar.close()


def pending_items(
    warehouse: str | Path, items: Sequence[JudgeItem], subjects: int | None = None
) -> tuple[list[JudgeItem], JudgeReport]:
    """The items whose verdicts are not landed yet (one per key), and the report so far."""
    report = JudgeReport(subjects=len(items) if subjects is None else subjects)
    unique: dict[str, JudgeItem] = {}
    for it in items:
        unique.setdefault(it.judgment_id, it)
    report.verdicts = len(unique)
    done = landed_judgment_keys(warehouse, unique)
    report.cached = len(done)
    return [it for k, it in unique.items() if k not in done], report


def judged_batches(
    backend: Backend, judge: Judge, todo: Sequence[JudgeItem], run_id: str | None
) -> Iterator[tuple[list[dict[str, Any]], JudgeReport]]:
    """Ask the judge for every item of ``todo``: each batch's raw.judgments rows, with what
    they count (called, parsed / repaired / unparseable, errors). Never opens the warehouse,
    so a cluster worker runs it too (``judge_chunk``). A failed call is a batch of error
    rows, retried next run."""
    revision = backend.model_revision or model_fingerprint(
        judge.target.model, judge.target.revision
    )
    d = judge.target.decoding
    requests = [
        GenerationRequest(
            key=it.judgment_id,
            messages=it.messages,
            temperature=0.0 if d.temperature is None else d.temperature,
            top_p=d.top_p,
            max_new_tokens=d.max_new_tokens,
            seed=d.seed,
            json_schema=decoding_schema(it.kind) if judge.structured else None,
        )
        for it in todo
    ]
    by_key = {it.judgment_id: it for it in todo}
    for results in results_in_batches(backend, requests, backend.concurrency, fail_batch=True):
        counts = JudgeReport(called=len(results))
        rows = []
        for result in results:
            row, verdict = _result_row(by_key[result.key], judge, revision, result, run_id)
            rows.append(row)
            if verdict is None:
                counts.errors += 1
            else:
                setattr(counts, verdict.parse_status, getattr(counts, verdict.parse_status) + 1)
                counts.spans_not_found += verdict.spans_not_found
        yield rows, counts


def judge_chunk_rows(
    judge: Judge, items: Sequence[JudgeItem], run_id: str | None
) -> dict[str, Any]:
    """One chunk of a judge's verdicts, asked where this runs (a cluster worker): its rows and
    counts, for the flow's process to land (``land_judged``). When the backend is cancelled
    (a stop in this process), the verdicts of the batches that finished are returned."""
    import contextlib

    from ableaudit.backends import make_backend

    backend = make_backend(judge.target)
    rows: list[dict[str, Any]] = []
    counts = JudgeReport()
    try:
        with contextlib.suppress(GenerationCancelled):
            for batch, batch_counts in judged_batches(backend, judge, items, run_id):
                rows += batch
                counts.add(batch_counts)
    finally:
        backend.close()
    return {"rows": rows, "counts": counts.as_dict()}


def land_judged(
    warehouse: str | Path, report: JudgeReport, rows: list[dict[str, Any]], counts: JudgeReport
) -> None:
    """Land one batch of verdicts and add what it did to ``report``."""
    landed = land_judgments(warehouse, rows)
    report.add(counts)
    report.inserted += landed.inserted
    report.retried += landed.retried


def run_items(
    warehouse: str | Path,
    judge: Judge,
    backend: Backend | LazyBackend | Callable[[], Backend],
    items: Sequence[JudgeItem],
    run_id: str | None = None,
    subjects: int | None = None,
    progress: Progress | None = None,
) -> JudgeReport:
    """Judge the items not landed yet, landing each chunk as it comes back (resumable).

    ``progress`` is called once before the first call and after each landed chunk.
    """
    todo, report = pending_items(warehouse, items, subjects)
    kind = items[0].kind if items else ""
    if progress is not None:
        progress(judge.name, kind, 0, len(todo))
    if not todo:
        return report
    owned = None
    if isinstance(backend, LazyBackend):
        lazy = backend
    elif isinstance(backend, Backend):
        lazy = LazyBackend(lambda: backend)  # the caller owns it and closes it
    else:
        lazy = owned = LazyBackend(backend)
    try:
        done_now = 0
        for rows, counts in judged_batches(lazy.get(), judge, todo, run_id):
            land_judged(warehouse, report, rows, counts)
            done_now += len(rows)
            if progress is not None:
                progress(judge.name, kind, done_now, len(todo))
    finally:
        if owned is not None:
            owned.close()
    return report


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
    """Compare each disability response (B) with its neutral response (A)."""
    identity = judge_identity(judge)
    items = [contrastive_item(identity, p) for p in pairs]
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
    return [contrastive_item(identity, p) for p in pairs], len(pairs)


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


# --------------------------------------------------------------------------- re-parsing


def reparse_judgments(warehouse: str | Path) -> dict[str, int]:
    """Parse every landed verdict's raw_output again with the current parser.

    The judge's text is never changed; only parse_status, parsed_json and
    parse_notes are rewritten where the parser now reads it differently (after
    a parser fix). Returns {'checked': n, 'changed': m}.
    """
    con = connect(warehouse)
    try:
        rows = con.execute(
            "select j.judgment_id, j.judge_kind, j.raw_output, j.parse_status, j.parsed_json, j.parse_notes, "
            "g.response_text from raw.judgments j left join raw.generations g "
            "on g.generation_id = j.disability_generation_id where j.call_status = 'ok'"
        ).fetchall()
        changed = []
        for jid, kind, raw, status, parsed, notes, response_b in rows:
            v = parse_verdict(kind, raw, response_b)
            old_notes = json.loads(notes) if notes else []
            v.notes += [n for n in old_notes if n.startswith("judge_truncated:")]
            if (v.parse_status, v.parsed_json, v.notes_json) != (status, parsed, notes):
                changed.append((v.parse_status, v.parsed_json, v.notes_json, jid))
    finally:
        con.close()
    update_judgment_parses(warehouse, changed)
    return {"checked": len(rows), "changed": len(changed)}
