"""How the report prints numbers and shades cells.

One formatter per kind of figure, so a rate, a p-value or a shift looks the same
everywhere. Shading uses matplotlib's colour maps: ``cividis`` (designed to read
the same with the common colour-vision deficiencies, and monotone in lightness)
for rates, and ``PuOr`` (purple-orange, no red-green contrast) for signed
changes. The text colour of a shaded cell is black or white, whichever contrasts
more with the background; either reaches at least 4.5:1 on any colour (WCAG AA).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pandas as pd

from ableaudit.report.records import Cell, Source

NA = "n/a"
RATE_SCALE = "cividis_r"
CHANGE_SCALE = "PuOr_r"
RATE_LEGEND = (
    "Shading: the cividis colour scale, from pale yellow at 0 % to dark blue at 100 % "
    "(darker is a larger rate, as in the papers); every cell prints its value, so the colour is never needed to read it."
)
SUPPORT_LEGEND = (
    "Shading: dark blue (and the word 'above') where the cell's whole 95 % interval lies above the overall rate "
    "of its model, arm and measure, pale yellow ('below') where it lies below, none where the interval contains "
    "that rate: the data do not support a difference from it, however far the printed rate is. Cells are not "
    "ranked by darkness; every cell prints its value."
)
CHANGE_LEGEND = (
    "Shading: the purple-orange colour scale, purple for a lower rate (improved), orange for a higher one (regressed), "
    "white for no change; every cell prints its value and the direction in words."
)


def missing(value: Any) -> bool:
    """None, NaN and pandas' NA are all 'no value'."""
    if value is None:
        return True
    try:
        result = pd.isna(value)
    except (TypeError, ValueError):
        return False
    return isinstance(result, (bool, np.bool_)) and bool(result)


def pct(value: Any) -> str:
    """A percentage with one decimal (the unit is in the header)."""
    return NA if missing(value) else f"{float(value):.1f}"


def signed(value: Any, digits: int = 2) -> str:
    """A signed difference (a shift in a metric's own units, a change in points)."""
    if missing(value):
        return NA
    v = float(value)
    if abs(v) < 0.5 * 10 ** (-digits):
        v = 0.0
    return f"{v:+.{digits}f}".replace("-", "\u2212")


def number(value: Any, digits: int = 2) -> str:
    """A plain figure (a mean, a kappa, a correlation)."""
    if missing(value):
        return NA
    v = float(value)
    if abs(v) < 0.5 * 10 ** (-digits):
        v = 0.0
    return f"{v:.{digits}f}".replace("-", "\u2212")


def count(value: Any) -> str:
    """A count of rows, pairs or models."""
    return NA if missing(value) else f"{int(value):d}"


def pvalue(value: Any) -> str:
    """A p-value: three decimals, or '< 0.001'."""
    if missing(value):
        return NA
    v = float(value)
    return "< 0.001" if v < 0.001 else f"{v:.3f}"


def threshold(value: Any) -> str:
    """A degradation threshold as a share of |neutral score| (0.05 is the papers' 5 %)."""
    return NA if missing(value) else f"{float(value):g}"


def interval(low: Any, high: Any, digits: int = 2, sign: bool = True) -> str:
    """A confidence interval as '[low, high]' (with signs for a shift, without for a rate)."""
    if missing(low) or missing(high):
        return NA
    if not sign:
        return f"[{float(low):.{digits}f}, {float(high):.{digits}f}]"
    return f"[{signed(low, digits)}, {signed(high, digits)}]"


def _hex(rgba: tuple[float, ...]) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in rgba[:3])


def _luminance(hex_colour: str) -> float:
    """Relative luminance (WCAG 2.2 definition)."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two hex colours."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def ink_for(background: str) -> str:
    """Black or white text, whichever contrasts more with the background."""
    return (
        "#000000"
        if contrast(background, "#000000") >= contrast(background, "#ffffff")
        else "#ffffff"
    )


@functools.cache
def _colormap(name: str):
    """matplotlib's colormap of that name (its registry hands out a fresh copy on every
    lookup, which costs more than the colour itself)."""
    from matplotlib import colormaps

    return colormaps[name]


def rate_colour(value: Any) -> str | None:
    """The shade of a rate in percent (0-100); None for no value."""
    if missing(value):
        return None
    return _hex(_colormap(RATE_SCALE)(min(max(float(value), 0.0), 100.0) / 100.0))


SUPPORT_POSITIONS = {"above": 85.0, "below": 10.0}
"""Where on the rate scale the two supported directions sit: dark for above, pale for below."""


def support_colour(vs_overall: Any) -> str | None:
    """The shade of a cell by the mart's ``vs_overall``: 'above' dark, 'below' pale, anything
    else (its interval contains the overall rate, or it has none) no shade."""
    position = SUPPORT_POSITIONS.get(vs_overall) if isinstance(vs_overall, str) else None
    return None if position is None else rate_colour(position)


def change_colour(value: Any, span: float = 50.0) -> str | None:
    """The shade of a signed change in points; saturates at +/- ``span``."""
    if missing(value):
        return None
    x = min(max(float(value), -span), span) / span
    return _hex(_colormap(CHANGE_SCALE)(0.5 + 0.5 * x * 0.85))


def shaded(
    text: str,
    value: Any,
    source: Source,
    *,
    colour: str | None,
    href: str | None = None,
    link_label: str | None = None,
    note: str | None = None,
    more: tuple[tuple[str, str, Source | None], ...] = (),
) -> Cell:
    """A numeric cell with its shade and the matching text colour."""
    return Cell(
        more=more,
        text=text,
        source=source,
        numeric=True,
        shade=colour,
        ink=ink_for(colour) if colour else None,
        href=href,
        link_label=link_label,
        note=note,
    )


def fig(text: str, source: Source, note: str | None = None) -> Cell:
    """A numeric cell without shading."""
    return Cell(text=text, source=source, numeric=True, note=note)


def label(text: Any) -> Cell:
    """A text cell (a name, a status)."""
    return Cell(text=NA if missing(text) else str(text))


def row_header(text: Any) -> Cell:
    """A row-header cell."""
    return Cell(text=NA if missing(text) else str(text), header=True)


def is_finite(value: Any) -> bool:
    """A real number that is not NaN or infinite."""
    return not missing(value) and math.isfinite(float(value))
