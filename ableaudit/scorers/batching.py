"""Batching for the transformer scorers: texts of similar token length together.

A batch is padded to its longest text, so sorting the texts by token length
before cutting batches wastes little padding (the encoders' cost grows with
the padded length). The batches hold positions; the caller puts each result
back at its position, so the output order is the input's. ``sort=False`` keeps
the given order: the reference the sorted path must equal, and the baseline of
``bench/scorers.py``.
"""

from __future__ import annotations

from collections.abc import Sequence


def length_batches(lengths: Sequence[int], batch_size: int, sort: bool = True) -> list[list[int]]:
    """Positions grouped into batches of ``batch_size``, shortest first (stable) when ``sort``."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__) if sort else range(len(lengths))
    positions = list(order)
    size = max(1, int(batch_size))
    return [positions[i : i + size] for i in range(0, len(positions), size)]
