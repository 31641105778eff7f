"""The scorers, registered by name: what each one is called in SQL, its version, and its function.

A scorer registers an Arrow function (texts in, one value per text out) that
the dbt-duckdb plugin exposes as a SQL function; the score models call it on
the texts still to score (macro texts_to_score).
A score is cached per text and scorer version, so bumping a version re-scores
every text once and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

ArrowFunction = Callable[[pa.Array | pa.ChunkedArray], pa.Array]


@dataclass(frozen=True)
class Scorer:
    name: str
    """The scorer's name (a metric of seeds/metrics.csv, or 'refusal')."""
    version: str | Callable[[str | None], str]
    """Its version; a model-based scorer's depends on the model reference."""
    sql_function: str | None = None
    """The SQL function the plugin registers."""
    function: ArrowFunction | None = None
    """Arrow texts in, Arrow values out, one per text."""
    returns: str = "DOUBLE"
    """The SQL type of the function's value."""
    returns_nulls: bool = False
    """Whether the function returns null for some non-null texts (DuckDB must then not assume it never does)."""
    arguments: tuple[str, ...] = ("VARCHAR",)
    """The SQL types of its arguments: the text, then any settings (e.g. a model reference)."""
    side_effects: bool = False
    """Whether a call does more than compute (loads a model): DuckDB then runs it once per row."""

    def version_for(self, model_ref: str | None = None) -> str:
        return self.version(model_ref) if callable(self.version) else self.version


SCORERS: dict[str, Scorer] = {}


def scorer(
    name: str,
    version: str | Callable[[str | None], str],
    sql_function: str,
    returns: str,
    returns_nulls: bool = False,
    arguments: tuple[str, ...] = ("VARCHAR",),
    side_effects: bool = False,
) -> Callable[[ArrowFunction], ArrowFunction]:
    """Register a per-text Arrow function as scorer ``name`` (``@scorer(...)`` over its definition)."""

    def register(function: ArrowFunction) -> ArrowFunction:
        _add(
            Scorer(
                name,
                version,
                sql_function,
                function,
                returns,
                returns_nulls,
                arguments,
                side_effects,
            )
        )
        return function

    return register


def _add(entry: Scorer) -> None:
    if entry.name in SCORERS and SCORERS[entry.name] != entry:
        raise ValueError(f"scorer {entry.name!r} is registered twice")
    SCORERS[entry.name] = entry


def registered() -> dict[str, Scorer]:
    """Every scorer, its modules imported (each registers itself on import)."""
    from ableaudit.scorers import refusals, regard, vader, verbosity  # noqa: F401

    return SCORERS


def scorer_version(name: str, model_ref: str | None = None) -> str:
    """The version scorer ``name`` writes today."""
    scorers = registered()
    if name not in scorers:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(sorted(scorers))}")
    return scorers[name].version_for(model_ref or None)
