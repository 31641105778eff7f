"""What every report page shares: the builders' context, row keys, groups, labels and the cells that carry an interval.

A page builder reads its marts through ``Context`` and prints mart values only;
these helpers turn rows into keys (for the evidence links), cells and data statements."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd

from ableaudit.report import format as fmt
from ableaudit.report.marts import Marts
from ableaudit.report.records import (
    Cell,
    Source,
)

ALPHA = 0.05
DIMENSIONS = ("interpret", "stereotype", "framing", "abstain")
"""The built-in judge dimensions, in the order the report shows them."""
BASELINE = "baseline"
Links = Callable[..., "str | None"]


def dimensions_in(shift: pd.DataFrame) -> list[str]:
    """The judge dimensions of interpretive_shift rows: the built-in ones in their order, then
    those of judges' own dimension sets by name."""
    found = set(shift.dimension.dropna()) if not shift.empty else set()
    return [d for d in DIMENSIONS if d in found] + sorted(found - set(DIMENSIONS))


def none_if_missing(value: Any) -> Any:
    return None if fmt.missing(value) else value


def key_of(row: Any, columns: Iterable[str]) -> dict[str, Any]:
    """The key of a mart row, JSON-ready (NaN becomes null, numpy scalars plain Python)."""
    if hasattr(row, "_asdict"):
        row = row._asdict()
    out = {}
    for c in columns:
        v = none_if_missing(row[c])
        out[c] = v.item() if hasattr(v, "item") else v
    return out


def grouped(frame: pd.DataFrame, by: list[str]) -> list[tuple[tuple, pd.DataFrame]]:
    if frame.empty:
        return []
    return [
        ((k,) if not isinstance(k, tuple) else k, g)
        for k, g in frame.groupby(by, sort=True, dropna=False)
    ]


def metric_label(metric: str) -> str:
    if metric.startswith("judge_score:"):
        return f"judge score ({metric.split(':', 1)[1]})"
    if ":" in metric:
        dim, judge = metric.split(":", 1)
        return f"{dim} ({judge})"
    return metric


def ordered_arms(values: Iterable[str]) -> list[str]:
    """Arms with the baseline first."""
    vals = sorted(set(values))
    return ([BASELINE] if BASELINE in vals else []) + [v for v in vals if v != BASELINE]


FAMILIES = (
    ("answer", "Scores of each answer"),
    ("judge", "Judge scores"),
    ("pair", "Pair metrics: similarity and parity"),
    ("other", "Other metrics"),
    ("contrastive", "Contrastive judge dimensions"),
)
"""The metric families the report groups metrics into, in its order, with their titles."""


class Names:
    """Display names of metrics and disabilities, and each metric's family, read from the
    warehouse: ``stg_seeds__metrics`` (display_name), ``stg_seeds__disabilities``
    (display_name, sort_order), and the registries' scorers (``stg_registry__scorers``: a
    score of each answer, masked or not) and pair scorers (``stg_registry__pair_scorers``)."""

    def __init__(self, marts: Marts) -> None:
        metrics = marts.frame("stg_seeds__metrics")
        self.metrics = (
            {
                r.metric: r.display_name
                for r in metrics.itertuples()
                if isinstance(r.display_name, str)
            }
            if not metrics.empty
            else {}
        )
        disabilities = marts.frame("stg_seeds__disabilities", "", "sort_order, disability_id")
        self.disabilities = (
            dict(zip(disabilities.disability_id, disabilities.display_name))
            if not disabilities.empty
            else {}
        )
        self.order = {d: i for i, d in enumerate(self.disabilities)}
        self.families: dict[str, str] = {}
        for relation, family in (
            ("stg_registry__scorers", "answer"),
            ("stg_registry__pair_scorers", "pair"),
        ):
            frame = marts.frame(relation)
            if "metric" in frame:
                self.families.update(dict.fromkeys(frame.metric.dropna(), family))

    def metric(self, metric: str) -> str:
        """The display name of a metric id, of 'judge_score:<judge>', or of a judge dimension
        ('<dimension>:<judge>', 'contrastive:<judge>:<dimension>'); the id when none is recorded."""
        if metric.startswith("contrastive:"):
            _, judge, dim = metric.split(":", 2)
            metric = f"{dim}:{judge}"
        if ":" in metric:
            base, judge = metric.split(":", 1)
            if base in self.metrics:
                return f"{self.metrics[base]} ({judge})"
            return f"{base.capitalize()} labelled Yes ({judge})"
        return self.metrics.get(metric, metric)

    def disability(self, disability: str) -> str:
        """The display name of a disability id; the id when the seed has none."""
        return self.disabilities.get(disability, disability)

    def sorted_disabilities(self, ids: Iterable[str]) -> list[str]:
        """Disability ids in the seed's order, unknown ones last by id."""
        return sorted(set(ids), key=lambda d: (self.order.get(d, len(self.order)), d))

    def family(self, metric: str) -> str:
        """The family of a measure: a judge dimension ('<dimension>:<judge>') 'contrastive', a
        judge's score 'judge', else the registry's: 'answer' or 'pair'; 'other' for the rest."""
        if ":" in metric:
            return "judge" if metric.startswith("judge_score:") else "contrastive"
        return self.families.get(metric, "other")


@dataclass
class Context:
    """What every section builder needs: the marts and the evidence links."""

    marts: Marts
    """The warehouse, read-only."""
    link: Links
    """``link(task, query_set, model_id, **filters)``: the href of the pairs behind a cell, or None."""
    chart_ids: Iterator[str]
    """A supply of unique ids for charts."""

    def next_id(self) -> str:
        return next(self.chart_ids)

    @cached_property
    def names(self) -> Names:
        """Display names and metric families, read once."""
        return Names(self.marts)


def data_statement(
    marts: Marts,
    relation: str,
    key: dict[str, Any] | None = None,
    judges: bool = True,
    pairs_column: str = "n_pairs",
) -> list[tuple[str, list[tuple[str, Source | None]]]]:
    """Models, arms, runs, pairs per row, threshold and judges of the mart rows matching ``key``.

    The statement describes exactly the rows ``key`` selects (so each figure in it
    can be checked against the mart), even when a section shows fewer of them.
    """
    frame = marts.frame(relation)
    for col, value in (key or {}).items():
        frame = frame[frame[col] == value]
    runs = marts.frame("data_quality")
    key = key or {}
    out: list[tuple[str, list[tuple[str, Source | None]]]] = []
    if frame.empty:
        return out
    if "model_id" in frame:
        models = sorted(frame.model_id.dropna().unique())
        out.append(("Models", [(", ".join(models), None)]))
    if "task" in frame:
        out.append(("Tasks", [(", ".join(sorted(frame.task.dropna().unique())), None)]))
    if "arm" in frame:
        out.append(("Arms", [(", ".join(ordered_arms(frame.arm.dropna())), None)]))
    if not runs.empty and "model_id" in frame:
        run_ids = sorted(runs[runs.model_id.isin(frame.model_id)].run_id.dropna().unique())
        if run_ids:
            out.append(("Runs", [(", ".join(run_ids), None)]))
    if pairs_column in frame and frame[pairs_column].notna().any():
        out.append(
            (
                "Pairs per row",
                [
                    (
                        fmt.count(frame[pairs_column].min()),
                        Source(relation, pairs_column, key, "min"),
                    ),
                    (" to ", None),
                    (
                        fmt.count(frame[pairs_column].max()),
                        Source(relation, pairs_column, key, "max"),
                    ),
                ],
            )
        )
    if "threshold" in frame and frame.threshold.notna().any():
        values = sorted(frame.threshold.dropna().unique())
        items: list[tuple[str, Source | None]] = []
        for i, v in enumerate(values):
            if i:
                items.append((", ", None))
            items.append((fmt.threshold(v), Source(relation, "threshold", key, "distinct")))
        items.append((" (share of |neutral score|)", None))
        out.append(("Threshold", items))
    if judges and "judge_name" in frame:
        names = sorted(frame.judge_name.dropna().unique())
        out.append(("Judges", [(", ".join(names) if names else "none", None)]))
    return out


def ci_cell(
    row: Any,
    low: str,
    high: str,
    relation: str,
    key: dict | None,
    digits: int = 2,
    sign: bool = True,
) -> Cell:
    """An interval cell; its two ends each carry their provenance (low in source, high in ``note`` source)."""
    if key is None or fmt.missing(row[low]) or fmt.missing(row[high]):
        return fmt.label(fmt.NA)
    return Cell(
        text=fmt.interval(row[low], row[high], digits, sign),
        numeric=True,
        source=Source(relation, f"{low}|{high}", key),
    )


def reference_arm(arms: Iterable[str]) -> str:
    arms = ordered_arms(arms)
    return arms[0]


def json_dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
