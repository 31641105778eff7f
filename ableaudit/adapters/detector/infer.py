"""Applying a trained detector to pairs: batched, on GPU when present, and never a silent "No".

Every pair gets a verdict with a ``status``:

  scored           the detector read the whole pair; labels and probabilities are set
  truncated        the pair was longer than the detector's max_length and its adapter's
                   overflow rule is 'truncate': scored on the first tokens of each side
                   (longest side cut first); labels set, n_tokens says by how much
  too_long         longer than max_length and the overflow rule is 'skip': no labels
  empty            response A or B is empty (or only whitespace): no labels
  incomplete_pair  the pair has no neutral side or a side failed (int_pairs.pair_status)
  no_adapter       no detector adapter is chosen or registered: no labels
  error            the adapter could not be loaded or the batch failed: no labels, with
                   the reason; retried by the next build

Labels are only ever set for 'scored' and 'truncated'. Results come back in the
caller's order; pairs are batched by token length inside (sorted, batched, put
back), so a batch pads little.

While no adapter is chosen or registered, ``detector_verdicts`` holds one row
(``no_adapter_table``: adapter_id 'none', no pair_id, the reason) instead of a
row per pair; with an adapter the pairs stream through ``verdict_batches`` a
chunk at a time, so the texts of every pair are never in memory at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from ableaudit.adapters.detector.data import DIMENSIONS, LABELS
from ableaudit.adapters.detector.model import LoadedDetector, count_tokens, encode, load_detector
from ableaudit.scorers.batching import length_batches

SCORED_STATUSES = ("scored", "truncated")
# final: a later build does not redo them for the same adapter and generations
FINAL_STATUSES = ("scored", "truncated", "too_long", "empty")
STATUSES = ("scored", "truncated", "too_long", "empty", "incomplete_pair", "no_adapter", "error")
NO_ADAPTER_ID = "none"


@dataclass
class PairVerdict:
    status: str
    reason: str | None = None
    n_tokens: int | None = None
    labels: dict[str, str | None] = field(default_factory=lambda: {d: None for d in DIMENSIONS})
    probs: dict[str, list[float]] | None = None


def predict_logits(
    det: LoadedDetector,
    pairs: Sequence[tuple[str, str]],
    batch_size: int = 64,
    lengths: Sequence[int] | None = None,
    sort_by_length: bool = True,
) -> list[dict[str, list[float]]]:
    """Softmax probabilities per dimension for each pair (truncated to max_length), in input order.

    Batched by token length (``lengths``, counted here when not given) unless
    ``sort_by_length`` is False."""
    import torch

    out: list[dict[str, list[float]] | None] = [None] * len(pairs)
    if sort_by_length and lengths is None:
        lengths = count_tokens(det.tokenizer, pairs)
    batches = length_batches(lengths or [0] * len(pairs), batch_size, sort=sort_by_length)
    det.model.eval()
    with torch.inference_mode():
        for idx in batches:
            enc = encode(det.tokenizer, [pairs[i] for i in idx], det.max_length)
            enc = {k: v.to(det.device) for k, v in enc.items()}
            logits = det.model(**enc)
            probs = {d: torch.softmax(logits[d].float(), dim=-1).cpu().tolist() for d in DIMENSIONS}
            for row, i in enumerate(idx):
                out[i] = {d: probs[d][row] for d in DIMENSIONS}
    return out  # type: ignore[return-value]


def score_pairs(
    det: LoadedDetector,
    pairs: Sequence[tuple[str | None, str | None]],
    batch_size: int = 64,
    sort_by_length: bool = True,
) -> list[PairVerdict]:
    """A verdict per (response A, response B) with its status (module docstring)."""
    verdicts: list[PairVerdict | None] = [None] * len(pairs)
    todo: list[int] = []
    for i, (a, b) in enumerate(pairs):
        if a is None or b is None or not a.strip() or not b.strip():
            side = "A" if a is None or not a.strip() else "B"
            verdicts[i] = PairVerdict(status="empty", reason=f"response {side} is empty")
        else:
            todo.append(i)
    lengths = dict(
        zip(todo, count_tokens(det.tokenizer, [(pairs[i][0], pairs[i][1]) for i in todo]))
    )
    run: list[int] = []
    for i in todo:
        n = lengths[i]
        if n > det.max_length and det.overflow == "skip":
            verdicts[i] = PairVerdict(
                status="too_long",
                n_tokens=n,
                reason=f"{n} tokens > max_length {det.max_length} (overflow rule 'skip')",
            )
        else:
            run.append(i)
    if run:
        try:
            probs = predict_logits(
                det,
                [(pairs[i][0], pairs[i][1]) for i in run],  # type: ignore[misc]
                batch_size,
                lengths=[lengths[i] for i in run],
                sort_by_length=sort_by_length,
            )
        except Exception as e:  # e.g. out of memory: rows with the reason, retried next build
            for i in run:
                verdicts[i] = PairVerdict(
                    status="error", n_tokens=lengths[i], reason=f"{type(e).__name__}: {e}"[:500]
                )
        else:
            for i, p in zip(run, probs):
                n = lengths[i]
                labels = {
                    d: LABELS[d][max(range(len(p[d])), key=p[d].__getitem__)] for d in DIMENSIONS
                }
                truncated = n > det.max_length
                verdicts[i] = PairVerdict(
                    status="truncated" if truncated else "scored",
                    n_tokens=n,
                    labels=labels,
                    probs=p,
                    reason=f"{n} tokens > max_length {det.max_length}: scored on the first tokens of each side"
                    if truncated
                    else None,
                )
    return verdicts  # type: ignore[return-value]


# --------------------------------------------------------------------------- the detector_verdicts table

SCHEMA = pa.schema(
    [
        ("pair_id", pa.string()),
        ("adapter_id", pa.string()),
        ("task", pa.string()),
        ("model_id", pa.string()),
        ("arm", pa.string()),
        ("query_set", pa.string()),
        ("query_id", pa.string()),
        ("disability_id", pa.string()),
        ("neutral_generation_id", pa.string()),
        ("disability_generation_id", pa.string()),
        ("pair_status", pa.string()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("n_tokens", pa.int32()),
        ("max_length", pa.int32()),
        ("interpret", pa.string()),
        ("stereotype", pa.string()),
        ("framing", pa.string()),
        ("abstain", pa.string()),
        ("p_interpret_yes", pa.float64()),
        ("p_stereotype_yes", pa.float64()),
        ("p_framing_yes", pa.float64()),
        ("p_abstain_yes", pa.float64()),
        ("probs_json", pa.string()),
        ("base_model", pa.string()),
        ("device", pa.string()),
        ("scored_at", pa.timestamp("us", tz="UTC")),
    ]
)

PAIR_COLUMNS = (
    "pair_id",
    "task",
    "model_id",
    "arm",
    "query_set",
    "query_id",
    "disability_id",
    "neutral_generation_id",
    "disability_generation_id",
    "pair_status",
    "response_a",
    "response_b",
)


def no_adapter_table(reason: str | None = None) -> pa.Table:
    """``detector_verdicts`` while no detector is chosen or registered: one row that says so.

    adapter_id 'none', status 'no_adapter', no pair_id (it stands for every pair
    of int_pairs) and the reason; nothing is read or loaded."""
    row = dict.fromkeys(SCHEMA.names)
    row.update(
        adapter_id=NO_ADAPTER_ID,
        status="no_adapter",
        reason=(reason or "no detector adapter registered")
        + ": no pair of int_pairs has a detector verdict",
        scored_at=datetime.now(UTC),
    )
    return pa.Table.from_pylist([row], schema=SCHEMA)


def verdict_batches(
    chunks: Iterable[pa.RecordBatch | pa.Table | Sequence[dict[str, Any]]],
    adapter: Any,
    *,
    batch_size: int = 64,
    device: str | None = "auto",
) -> Iterator[pa.RecordBatch]:
    """Rows of ``detector_verdicts``, one record batch per chunk of int_pairs rows
    (with response_a / response_b), for the registered ``adapter`` (an ``AdapterRecord``).

    The detector is loaded once, at the first complete pair, and used for every
    chunk; incomplete pairs are rows with status 'incomplete_pair' (or 'empty'
    when a side is empty) and need no load. A detector that cannot load makes
    'error' rows with the reason, retried by the next build.
    """
    state: dict[str, Any] = {}
    try:
        for chunk in chunks:
            pairs = chunk.to_pylist() if isinstance(chunk, pa.RecordBatch | pa.Table) else chunk
            yield _verdict_batch(pairs, adapter, state, batch_size=batch_size, device=device)
    finally:
        if state.get("detector") is not None:
            _release(state["detector"])


def _verdict_batch(
    pairs: Sequence[dict[str, Any]],
    adapter: Any,
    state: dict[str, Any],
    *,
    batch_size: int,
    device: str | None,
) -> pa.RecordBatch:
    now = datetime.now(UTC)
    adapter_id = adapter.adapter_id
    verdicts: list[PairVerdict | None] = [None] * len(pairs)
    complete = []
    for i, p in enumerate(pairs):
        ps = p.get("pair_status")
        if ps in ("neutral_empty", "disability_empty"):
            verdicts[i] = PairVerdict(status="empty", reason=f"pair_status {ps}")
        elif ps != "complete":
            verdicts[i] = PairVerdict(status="incomplete_pair", reason=f"pair_status {ps}")
        else:
            complete.append(i)
    if complete and "detector" not in state and "error" not in state:
        try:
            state["detector"] = load_detector(adapter.path, device=device)
        except Exception as e:  # an adapter that cannot load is an error row, retried next build
            state["error"] = f"cannot load adapter {adapter_id}: {e}"[:500]
    det: LoadedDetector | None = state.get("detector")
    if complete and det is None:
        for i in complete:
            verdicts[i] = PairVerdict(status="error", reason=state["error"])
    elif complete and det is not None:
        scored = score_pairs(
            det,
            [(pairs[i].get("response_a"), pairs[i].get("response_b")) for i in complete],
            batch_size,
        )
        for i, v in zip(complete, scored):
            verdicts[i] = v
    dev = det.device if det is not None else None
    max_length = det.max_length if det is not None else None
    rows = []
    for p, v in zip(pairs, verdicts):
        assert v is not None
        probs = v.probs
        rows.append(
            {
                **{c: p.get(c) for c in PAIR_COLUMNS if c not in ("response_a", "response_b")},
                "adapter_id": adapter_id,
                "status": v.status,
                "reason": v.reason,
                "n_tokens": v.n_tokens,
                "max_length": max_length,
                **{d: v.labels.get(d) for d in DIMENSIONS},
                **{
                    f"p_{d}_yes": (probs[d][LABELS[d].index("Yes")] if probs else None)
                    for d in DIMENSIONS
                },
                "probs_json": json.dumps(
                    {d: dict(zip(LABELS[d], (round(x, 6) for x in probs[d]))) for d in DIMENSIONS},
                    sort_keys=True,
                )
                if probs
                else None,
                "base_model": adapter.base_model,
                "device": dev if v.status in SCORED_STATUSES else None,
                "scored_at": now,
            }
        )
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def verdict_table(
    pairs: Sequence[dict[str, Any]],
    adapter: Any | None,
    *,
    batch_size: int = 64,
    device: str | None = "auto",
    no_adapter_reason: str | None = None,
) -> pa.Table:
    """Rows of ``detector_verdicts`` for int_pairs rows (with response_a / response_b), at once.

    ``adapter`` is an ``AdapterRecord``, or None: the one 'no_adapter' row
    (``no_adapter_table``) with ``no_adapter_reason``."""
    if adapter is None:
        return no_adapter_table(no_adapter_reason)
    batches = list(verdict_batches([pairs], adapter, batch_size=batch_size, device=device))
    return pa.Table.from_batches(batches, schema=SCHEMA)


def _release(det: LoadedDetector) -> None:
    import gc

    import torch

    det.model = None
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def timed_scoring(
    det: LoadedDetector, pairs: Sequence[tuple[str, str]], batch_size: int = 64
) -> tuple[list[PairVerdict], float]:
    """score_pairs and its wall time in seconds (for the benchmark)."""
    t = time.perf_counter()
    out = score_pairs(det, pairs, batch_size)
    if det.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    return out, time.perf_counter() - t
