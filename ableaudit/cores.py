"""The cores this process may run on: what the scorers' worker pool, the scoring flow and an
import's threads size themselves by."""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
