"""Shared helpers of the statistics layer: typed output frames, reasons, warnings.

Every public function of `ableaudit.stats` returns a DataFrame whose columns and
dtypes are fixed by a schema (an ordered dict column -> pandas dtype), also when
the input is empty, so that a dbt python model can hand it to DuckDB/Arrow as is:
'str' becomes VARCHAR, 'float64' DOUBLE (NaN is read as a missing value),
'int64' BIGINT and 'bool' BOOLEAN.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

# A standard deviation this small relative to the data is treated as exactly zero:
# differences of floats that are equal on paper (0.3 - 0.1 vs 0.2) differ by ~1e-17.
REL_ZERO = 1e-12


def typed_frame(
    rows: Iterable[Mapping[str, Any]] | pd.DataFrame, schema: Mapping[str, str]
) -> pd.DataFrame:
    """A frame with exactly the schema's columns, in order, cast to its dtypes."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    out = pd.DataFrame(index=range(len(frame)))
    for col, dtype in schema.items():
        if col in frame.columns:
            values = frame[col].reset_index(drop=True)
        else:
            values = pd.Series([None] * len(frame), dtype=object)
        if dtype == "float64":
            values = pd.to_numeric(values, errors="coerce")
        out[col] = values.astype(dtype)
    return out


def require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """A missing input column is a wiring error, not a statistical degeneracy: raise."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: input lacks column(s) {missing}; has {list(df.columns)}")


class Reasons:
    """Collects 'statistic: why' strings; `text` is None when there are none."""

    def __init__(self) -> None:
        self._items: list[str] = []

    def add(self, stat: str, why: str) -> None:
        item = f"{stat}: {why}"
        if item not in self._items:
            self._items.append(item)

    @property
    def text(self) -> str | None:
        return "; ".join(self._items) if self._items else None


def quiet_call(
    fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> tuple[Any, list[str], Exception | None]:
    """Call a library function with warnings recorded instead of printed.

    Returns (result or None, warning messages, exception or None), so that a
    degenerate input becomes a reason in the output rather than a crash or a
    stray warning in the dbt log.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
            err = None
        except (ValueError, ZeroDivisionError, FloatingPointError, np.linalg.LinAlgError) as exc:
            result, err = None, exc
    return result, [str(w.message).splitlines()[0] for w in caught], err


def finite(x: Any) -> float:
    """A float, or NaN when x is None, NaN or +-inf (an infinite statistic is never reported)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v if np.isfinite(v) else float("nan")


def is_zero_sd(values: np.ndarray) -> bool:
    """True when the sample has (numerically) no spread."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return True
    scale = max(1.0, float(np.max(np.abs(v))))
    return float(np.ptp(v)) <= REL_ZERO * scale


def stable_seed(seed: int, *key: Any) -> np.random.SeedSequence:
    """A SeedSequence from a base seed and a group key, stable across processes.

    Python's hash() of a str is salted per process; crc32 is not. Each group gets
    its own stream, so a group's result does not depend on which other groups exist.
    """
    words = [int(seed) & 0xFFFFFFFF] + [zlib.crc32(repr(k).encode("utf-8")) for k in key]
    return np.random.SeedSequence(words)


def group_key_values(key: Any) -> tuple:
    return key if isinstance(key, tuple) else (key,)
