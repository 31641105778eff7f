"""Vision audits: the group statistics of group_bias.

A vision generation is a text generation with an image beside the prompt. It
lands in ``raw.generations`` like any other, with ``task = 'vision'``,
``query_set`` = the image set, ``query_id`` = the image id and ``domain`` = the
image's category, so the warehouse pairs each disability description with the
neutral description of the same image, model, arm, temperature and sample
(``int_pairs``) and every text metric, judge and mart applies unchanged.
Which generations a vision audit needs is planned on the one path text
audits take (``ableaudit.audit.planning``); the key of a vision generation
also hashes the sha256 of the image's bytes, so a changed picture is a new
generation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

# --------------------------------------------------------------------------- group statistics (group_bias)

GROUPINGS = ("gender", "race", "gender_race")
CELL_KEYS = ["task", "model_id", "arm", "query_set", "temperature", "measure_id"]
GROUP_CI_SCHEMA: dict[str, str] = {
    "task": "str",
    "model_id": "str",
    "arm": "str",
    "query_set": "str",
    "temperature": "float64",
    "measure_id": "str",
    "grouping": "str",
    "group_value": "str",
    "ci_low_pct": "float64",
    "ci_high_pct": "float64",
    "n_boot": "int64",
    "ci_reason": "str",
}


def group_delta_ci(
    pairs: pd.DataFrame,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    groupings: Iterable[str] = GROUPINGS,
) -> pd.DataFrame:
    """Percentile CIs of delta = rate(group) - rate(all), in percentage points, by a cluster bootstrap.

    ``pairs``: one row per included pair and measure, with CELL_KEYS, ``query_id``
    (the image: the cluster), ``outcome`` (0/1) and one column per grouping.
    Each replicate draws as many images as the cell has, with replacement, and
    recomputes both rates over the pairs of the drawn images (an image drawn
    twice counts twice), so the delta's CI reflects that an image's nine
    disability pairs are not independent. A replicate that draws no image of
    the group has no delta; the CI is taken over the others and ``ci_reason``
    says how many were dropped. Each cell has its own random stream
    (``stable_seed``), so a cell's CI does not depend on which other cells exist.
    """
    from ableaudit.stats._common import stable_seed, typed_frame

    groupings = list(groupings)
    out: list[dict[str, Any]] = []
    if pairs.empty:
        return typed_frame([], GROUP_CI_SCHEMA)
    frame = pairs.copy()
    frame["temperature"] = frame["temperature"].astype(float)
    alpha = (1.0 - level) / 2.0
    for key, cell in frame.groupby(CELL_KEYS, sort=True, dropna=False):
        codes, images = pd.factorize(cell["query_id"], sort=True)
        k = len(images)
        y = cell["outcome"].to_numpy(dtype=float)
        sums = np.bincount(codes, weights=y, minlength=k)
        counts = np.bincount(codes, minlength=k).astype(float)
        idx = None
        if k >= 2 and n_boot >= 1:
            rng = np.random.default_rng(stable_seed(seed, *key))
            idx = rng.integers(0, k, size=(n_boot, k))
            all_rate = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
        base = dict(zip(CELL_KEYS, key))
        for grouping in groupings:
            if grouping not in cell.columns:
                continue
            # every pair of an image shares its identity, so group membership is per image
            image_group = cell.groupby(codes)[grouping].first().reindex(range(k))
            for value in sorted(v for v in image_group.dropna().unique()):
                row = dict(
                    base,
                    grouping=grouping,
                    group_value=value,
                    n_boot=n_boot,
                    ci_low_pct=float("nan"),
                    ci_high_pct=float("nan"),
                    ci_reason=None,
                )
                if idx is None:
                    row["ci_reason"] = "fewer than 2 images" if k < 2 else "n_boot<1"
                    out.append(row)
                    continue
                member = (image_group == value).to_numpy(dtype=float)
                g_counts = (counts * member)[idx].sum(axis=1)
                g_sums = (sums * member)[idx].sum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    delta = 100.0 * (g_sums / g_counts - all_rate)
                ok = np.isfinite(delta)
                if not ok.any():
                    row["ci_reason"] = "no replicate drew an image of the group"
                else:
                    low, high = np.quantile(delta[ok], [alpha, 1.0 - alpha])
                    row["ci_low_pct"], row["ci_high_pct"] = float(low), float(high)
                    dropped = int((~ok).sum())
                    if dropped:
                        row["ci_reason"] = (
                            f"{dropped} of {n_boot} replicates drew no image of the group (dropped)"
                        )
                out.append(row)
    return typed_frame(out, GROUP_CI_SCHEMA)
