"""Regard: how a response regards the person it answers (AccessEval section 3.4, metric 2).

The classifier is ``sasha/regardv3`` (Sheng et al. 2019's regard, as used by
HF ``evaluate``), or any sequence classifier whose labels include ``positive``
and ``negative``. The score is P(positive) - P(negative), in [-1, 1].

Two things are never hidden:

- a text longer than the classifier's maximum length is scored on its first
  tokens and gets ``status='truncated'`` with the token counts in ``reason``;
- when the classifier cannot be loaded (not downloaded, offline, bad path) every
  text gets ``score=None, status='unavailable'`` and the reason. A fake score is
  never produced.

Availability is decided once per build and cheaply: a local folder that does
not exist, or a Hugging Face id absent from the offline cache, is known to be
unavailable without importing torch (``availability``); the outcome of a load
is remembered per reference and files, so a build loads (or fails to load) the
classifier once. The dbt model asks first (``regard_score(text, model, 0)``, the
probe) and rewrites an 'unavailable' text only when the reason changed: while
nothing changes an unavailable classifier costs milliseconds, and once it can
be loaded every unavailable text is scored by the next build.

Texts are scored in batches of similar token length (sorted, batched, put back
in order), on CUDA when torch sees a GPU.

The dbt model ``response_scores_regard`` picks the texts to score (the
``texts_to_score`` macro, as for every scorer) and calls ``regard_scores_arrow``
as the DuckDB UDF ``regard_score`` (registered by ``ableaudit.dbt.plugin``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ableaudit.scorers.batching import length_batches
from ableaudit.scorers.declare import Metric, scorer

# Bump when the scoring procedure changes; the model reference is appended, so
# switching classifiers re-scores every text once under the new version.
SCORER_VERSION = "regard-1"
DEFAULT_MODEL = "sasha/regardv3"

# What the UDF returns per text: the columns of response_scores_regard it fills.
SCORE_TYPE = pa.struct(
    [
        ("regard", pa.float64()),
        ("p_positive", pa.float64()),
        ("p_negative", pa.float64()),
        ("n_tokens", pa.int32()),
        ("max_tokens", pa.int32()),
        ("status", pa.string()),
        ("reason", pa.string()),
    ]
)
SCORE_SQL_TYPE = (
    "STRUCT(regard DOUBLE, p_positive DOUBLE, p_negative DOUBLE, n_tokens INTEGER, max_tokens INTEGER, "
    "status VARCHAR, reason VARCHAR)"
)


class RegardUnavailable(RuntimeError):
    """The classifier cannot be loaded; the message says why and how to fix it."""


@dataclass(frozen=True)
class RegardScore:
    regard: float | None
    p_positive: float | None
    p_negative: float | None
    n_tokens: int | None
    max_tokens: int | None
    status: str
    reason: str | None = None


@dataclass
class RegardModel:
    tokenizer: Any
    model: Any
    positive_index: int
    negative_index: int
    max_tokens: int
    device: str


def scorer_version(model_ref: str) -> str:
    return f"{SCORER_VERSION}|{model_ref}"


def model_reference(model_ref: str | None = None) -> str:
    """The classifier to use: explicit, then ABLEAUDIT_REGARD_MODEL, then sasha/regardv3."""
    return model_ref or os.environ.get("ABLEAUDIT_REGARD_MODEL") or DEFAULT_MODEL


_LOADED: dict[str, tuple[tuple[Any, ...], RegardModel]] = {}
_FAILED: dict[tuple[Any, ...], str] = {}
# a Hugging Face model id: 'name' or 'owner/name'
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _hint(allow_download: bool) -> str:
    return (
        "set ABLEAUDIT_REGARD_MODEL to a local copy of sasha/regardv3"
        if allow_download
        else "set ABLEAUDIT_ALLOW_DOWNLOAD=1 to fetch it, or ABLEAUDIT_REGARD_MODEL to a local copy"
    )


def _locate(model_ref: str, allow_download: bool) -> tuple[Any, ...]:
    """What a load of ``model_ref`` would read, as a key that changes when those files change.

    Raises RegardUnavailable, without importing torch, when there is nothing to load:
    no such local folder and no copy in the offline Hugging Face cache (downloads off).
    """
    folder = Path(model_ref).expanduser()
    if folder.is_dir():
        files = tuple(
            (f.name, f.stat().st_mtime_ns, f.stat().st_size)
            for f in sorted(folder.iterdir())
            if f.is_file()
        )
        return ("folder", str(folder.resolve()), files, allow_download)
    cached = None
    if _HUB_ID.match(model_ref):
        from huggingface_hub import try_to_load_from_cache

        try:
            cached = try_to_load_from_cache(model_ref, "config.json")
        except Exception:  # noqa: BLE001 - a malformed id is simply not in the cache
            cached = None
    if isinstance(cached, str):
        stat = os.stat(cached)
        return ("hub", model_ref, cached, stat.st_mtime_ns, allow_download)
    if allow_download and _HUB_ID.match(model_ref):
        return ("hub", model_ref, None, allow_download)
    raise RegardUnavailable(
        f"cannot load regard classifier {model_ref!r} (no such local folder, and not in the "
        f"offline Hugging Face cache); {_hint(allow_download)}"
    )


def location_key(model_ref: str, allow_download: bool | None = None) -> str:
    """What a load of ``model_ref`` would read, or why nothing can be loaded, as text: it
    changes when the classifier is installed, removed or changed (nothing is loaded)."""
    if allow_download is None:
        allow_download = os.environ.get("ABLEAUDIT_ALLOW_DOWNLOAD") == "1"
    try:
        return repr(_locate(model_ref, allow_download))
    except RegardUnavailable as err:
        return f"unavailable: {err}"


def load_regard(model_ref: str, allow_download: bool | None = None) -> RegardModel:
    """Load a classifier by HF id or local path; offline unless ABLEAUDIT_ALLOW_DOWNLOAD=1.

    Loads and failures are remembered with the files they read (``_locate``): a
    second call costs a directory listing, and a model installed or changed
    between two builds is loaded again.
    """
    if allow_download is None:
        allow_download = os.environ.get("ABLEAUDIT_ALLOW_DOWNLOAD") == "1"
    key = _locate(model_ref, allow_download)
    cached = _LOADED.get(model_ref)
    if cached is not None and cached[0] == key:
        return cached[1]
    if key in _FAILED:
        raise RegardUnavailable(_FAILED[key])
    try:
        loaded = _load(model_ref, allow_download)
    except RegardUnavailable as err:
        _FAILED[key] = str(err)
        raise
    _LOADED[model_ref] = (key, loaded)
    return loaded


def _load(model_ref: str, allow_download: bool) -> RegardModel:
    try:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_ref, local_files_only=not allow_download)
        model = AutoModelForSequenceClassification.from_pretrained(
            model_ref, local_files_only=not allow_download
        )
    except Exception as err:  # noqa: BLE001 - any load failure means 'unavailable', with its reason
        raise RegardUnavailable(
            f"cannot load regard classifier {model_ref!r} ({type(err).__name__}: {err}); "
            f"{_hint(allow_download)}"
        ) from err

    labels = {str(name).lower(): int(idx) for idx, name in model.config.id2label.items()}
    if "positive" not in labels or "negative" not in labels:
        raise RegardUnavailable(
            f"regard classifier {model_ref!r} has labels {sorted(labels)}; it needs 'positive' and 'negative'"
        )
    limits = [
        m
        for m in (
            getattr(tokenizer, "model_max_length", None),
            getattr(model.config, "max_position_embeddings", None),
        )
        if isinstance(m, int) and 0 < m < 1_000_000
    ]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return RegardModel(
        tokenizer=tokenizer,
        model=model.to(device).eval(),
        positive_index=labels["positive"],
        negative_index=labels["negative"],
        max_tokens=min(limits) if limits else 512,
        device=device,
    )


def availability(model_ref: str | None = None) -> str | None:
    """None when the classifier loads, else the reason every 'unavailable' row records."""
    try:
        load_regard(model_reference(model_ref))
    except RegardUnavailable as err:
        return str(err)[:1000]
    return None


def token_lengths(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Each text's length in tokens, untruncated (special tokens included)."""
    ids = tokenizer(list(texts), truncation=False, verbose=False)["input_ids"]
    return [len(i) for i in ids]


def _score_batch(rm: RegardModel, texts: list[str], lengths: list[int]) -> list[RegardScore]:
    import torch

    enc = rm.tokenizer(
        texts, truncation=True, max_length=rm.max_tokens, padding=True, return_tensors="pt"
    ).to(rm.device)
    with torch.inference_mode():
        probs = torch.softmax(rm.model(**enc).logits.float(), dim=-1).cpu()
    scores = []
    for n, p in zip(lengths, probs):
        pos, neg = float(p[rm.positive_index]), float(p[rm.negative_index])
        truncated = n > rm.max_tokens
        scores.append(
            RegardScore(
                regard=pos - neg,
                p_positive=pos,
                p_negative=neg,
                n_tokens=n,
                max_tokens=rm.max_tokens,
                status="truncated" if truncated else "ok",
                reason=f"{n} tokens > {rm.max_tokens}: scored the first {rm.max_tokens}"
                if truncated
                else None,
            )
        )
    return scores


def score_regard(
    texts: Sequence[str],
    model_ref: str | None = None,
    batch_size: int = 32,
    sort_by_length: bool = True,
) -> list[RegardScore]:
    """One RegardScore per text, in order; never raises for an unloadable model.

    Texts are batched by token length (``sort_by_length``; False keeps the
    given order, the reference the sorted path must equal)."""
    ref = model_reference(model_ref)
    if not texts:
        return []
    try:
        rm = load_regard(ref)
    except RegardUnavailable as err:
        return [RegardScore(None, None, None, None, None, "unavailable", str(err)[:1000])] * len(
            texts
        )
    return score_texts(rm, texts, batch_size, sort_by_length)


def score_texts(
    rm: RegardModel, texts: Sequence[str], batch_size: int = 32, sort_by_length: bool = True
) -> list[RegardScore]:
    """score_regard with a loaded classifier: texts batched by token length, results in order."""
    out: list[RegardScore | None] = [None] * len(texts)
    try:
        lengths = token_lengths(rm.tokenizer, texts)
    except Exception as err:  # noqa: BLE001 - recorded per text and retried by the next build
        reason = f"scoring failed ({type(err).__name__}: {err})"[:1000]
        return [RegardScore(None, None, None, None, rm.max_tokens, "error", reason)] * len(texts)
    for idx in length_batches(lengths, batch_size, sort=sort_by_length):
        try:
            batch_scores = _score_batch(rm, [texts[i] for i in idx], [lengths[i] for i in idx])
        except Exception as err:  # noqa: BLE001 - recorded per text and retried by the next build
            reason = f"scoring failed ({type(err).__name__}: {err})"[:1000]
            batch_scores = [
                RegardScore(None, None, None, None, rm.max_tokens, "error", reason)
            ] * len(idx)
        for i, s in zip(idx, batch_scores):
            out[i] = s
    return out  # type: ignore[return-value]


# DuckDB may call the UDF from several threads: one load and one forward pass at a time.
_SCORING = threading.Lock()


@scorer(
    "regard",
    lambda model_ref: scorer_version(model_reference(model_ref)),
    sql_function="regard_score",
    returns=SCORE_SQL_TYPE,
    arguments=("VARCHAR", "VARCHAR", "INTEGER"),
    returns_nulls=True,
    side_effects=True,
    model="response_scores_regard",
    metric=Metric(
        "Regard",
        "higher_is_better",
        "P(positive) - P(negative) of the sasha/regardv3 regard classifier (AccessEval 3.4, "
        "metric 2); higher is more favourable social perception.",
        scale_min=-1,
        scale_max=1,
    ),
)
def regard_scores_arrow(
    texts: pa.Array, model_refs: pa.Array, batch_sizes: pa.Array
) -> pa.StructArray:
    """The ``regard_score(text, model_ref, batch_size)`` UDF: one SCORE_TYPE struct per text, null for a null text.

    ``model_ref`` ('' = ABLEAUDIT_REGARD_MODEL, else sasha/regardv3) and
    ``batch_size`` are the same for every row of a call; the first row's are used.
    ``batch_size`` 0 is the availability probe: nothing is scored, each text gets
    status 'ok' (the classifier loads) or 'unavailable' with the reason its rows
    would record, and the other fields null.
    """
    values = texts.to_pylist()
    present = [i for i, t in enumerate(values) if t is not None]
    rows: list[dict[str, Any] | None] = [None] * len(values)
    if present:
        ref = model_refs[0].as_py() or None
        batch_size = batch_sizes[0].as_py()
        with _SCORING:
            if batch_size == 0:
                reason = availability(ref)
                probe = RegardScore(
                    None, None, None, None, None, "unavailable" if reason else "ok", reason
                )
                scores = [probe] * len(present)
            else:
                scores = score_regard([values[i] for i in present], ref, int(batch_size or 32))
        for i, score in zip(present, scores):
            rows[i] = {name: getattr(score, name) for name in SCORE_TYPE.names}
    return pa.array(rows, type=SCORE_TYPE)
