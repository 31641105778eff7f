"""Running a judge over its items: the backend loaded only when something is pending, the verdicts in batches, their rows, progress bars, and landing them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ableaudit.backends.base import (
    Backend,
    GenerationCancelled,
    GenerationRequest,
    GenerationResult,
    results_in_batches,
)
from ableaudit.config import Judge
from ableaudit.judges.items import JudgeItem
from ableaudit.judges.parsing import Verdict, parse_verdict
from ableaudit.judges.schemas import decoding_schema
from ableaudit.keys import model_fingerprint
from ableaudit.warehouse.landing import land_judgments, landed_judgment_keys


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
        # not a column of raw.judgments: landed beside it, in raw.judge_dimension_sets
        "dimension_set": item.dimension_set,
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
    verdict = parse_verdict(item.kind, text, item.response_b, item.dimensions)
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
            json_schema=decoding_schema(it.kind, it.dimensions) if judge.structured else None,
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
