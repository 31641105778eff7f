"""Charts as inline SVG, drawn by matplotlib.

Static SVG needs no script, no network and no animation, prints, zooms without
blur, and keeps its text as text. Each chart is an ``<svg role="img">`` labelled
by its own title and description; its data is always also a table beside it.
Series differ by colour (the Okabe-Ito palette, distinguishable with the common
colour-vision deficiencies), marker and line style, never by colour alone.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence
from itertools import cycle

MAX_LEGEND = 12  # more series than this are drawn without a legend; the data table beside the chart names them
# Okabe & Ito (2008), without yellow (too light on white).
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINES = ["-", "--", ":", "-."]
_RC = {
    "svg.fonttype": "none",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#d0d0d0",
    "grid.linewidth": 0.6,
    "text.color": "#000000",
    "axes.labelcolor": "#000000",
    "xtick.color": "#000000",
    "ytick.color": "#000000",
}


def _styles():
    """Colour, marker and line style for each series, in a fixed order."""
    return zip(cycle(PALETTE), cycle(MARKERS), cycle(LINES))


def _svg(fig, chart_id: str, title: str, summary: str) -> str:
    """The figure as accessible inline SVG (no XML prolog, no fixed size, no date)."""
    from matplotlib import rc_context

    buf = io.StringIO()
    with rc_context({"svg.hashsalt": chart_id, "svg.id": chart_id}):
        fig.savefig(
            buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None}
        )
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)
    # matplotlib names its groups line2d_1, patch_1, ... in every figure: prefix them, so several charts
    # on one page never share an id
    names = set(re.findall(r'\sid="([^"]+)"', svg))
    svg = re.sub(
        r'(\sid="|url\(#|href="#)([^"\)]+)(["\)])',
        lambda m: (
            m.group(1)
            + (f"{chart_id}-{m.group(2)}" if m.group(2) in names else m.group(2))
            + m.group(3)
        ),
        svg,
    )
    opening = re.match(r"<svg[^>]*>", svg).group(0)
    new_opening = re.sub(r'\s(width|height)="[^"]*"', "", opening)
    new_opening = new_opening.replace(
        "<svg",
        f'<svg role="img" focusable="false" class="chart" aria-labelledby="{chart_id}-t {chart_id}-d"',
        1,
    )
    labels = f'<title id="{chart_id}-t">{html.escape(title)}</title><desc id="{chart_id}-d">{html.escape(summary)}</desc>'
    return new_opening + labels + svg[len(opening) :]


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def line_chart(
    chart_id: str,
    title: str,
    summary: str,
    series: dict[str, list[tuple[float, float]]],
    xlabel: str,
    ylabel: str,
    ylim: tuple[float, float] | None = (0, 100),
) -> str:
    """One line per series, with markers at the data points."""
    from matplotlib import rc_context

    with rc_context(_RC):
        fig = _figure(6.4, 3.6)
        ax = fig.add_subplot()
        for (name, points), (colour, marker, line) in zip(series.items(), _styles()):
            xs, ys = zip(*points) if points else ((), ())
            ax.plot(
                xs,
                ys,
                color=colour,
                marker=marker,
                linestyle=line,
                label=name,
                linewidth=1.6,
                markersize=5,
            )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if ylim:
            ax.set_ylim(*ylim)
        if 0 < len(series) <= MAX_LEGEND:
            ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
        return _svg(fig, chart_id, title, summary)


def scatter_chart(
    chart_id: str,
    title: str,
    summary: str,
    series: dict[str, list[tuple[str, float, float]]],
    xlabel: str,
    ylabel: str,
    xlog: bool = True,
) -> str:
    """Labelled points, one marker and colour per series (e.g. per metric)."""
    from matplotlib import rc_context

    with rc_context(_RC):
        fig = _figure(6.4, 3.6)
        ax = fig.add_subplot()
        for (name, points), (colour, marker, _) in zip(series.items(), _styles()):
            if not points:
                continue
            _, xs, ys = zip(*points)
            ax.scatter(xs, ys, color=colour, marker=marker, label=name, s=30)
            for text, x, y in points:
                ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        if xlog:
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 100)
        if 0 < len(series) <= MAX_LEGEND:
            ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
        return _svg(fig, chart_id, title, summary)


def interval_chart(
    chart_id: str,
    title: str,
    summary: str,
    rows: Sequence[tuple[str, float, float | None, float | None]],
    xlabel: str,
) -> str:
    """A forest plot: one row per label, its estimate and interval, a line at zero."""
    from matplotlib import rc_context

    with rc_context(_RC):
        fig = _figure(6.4, max(1.6, 0.32 * len(rows) + 1.0))
        ax = fig.add_subplot()
        ys = list(range(len(rows)))[::-1]
        for y, (_name, est, low, high) in zip(ys, rows):
            if low is not None and high is not None:
                ax.plot([low, high], [y, y], color=PALETTE[0], linewidth=1.8)
            ax.plot([est], [y], marker="o", color=PALETTE[1], markersize=5)
        ax.axvline(0, color="#000000", linewidth=0.8)
        ax.set_yticks(ys, [r[0] for r in rows])
        ax.set_xlabel(xlabel)
        ax.grid(axis="y", visible=False)
        return _svg(fig, chart_id, title, summary)
