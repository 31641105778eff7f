"""The scorers, registered by name: the one declaration each per-text scorer has.

A scorer registers an Arrow function (texts in, one value per text out) that
the dbt-duckdb plugin exposes as a SQL function, with its version, what it reads
and, for a metric, its direction and scale (``Metric``). Everything else is derived
from the declaration: the model ``stg_registry__scorers`` (the scorers and their
metric rows, which ``stg_seeds__metrics`` joins to the seed's other metrics), the
SQL that scores the texts (a scorer without a model of its own is scored in the long
model ``response_scores_text``, macro ``registered_scorers``), the rows of
``int_generation_scores`` and ``pair_details``, and the scorers ``ableaudit score`` runs.
A score is cached per text and scorer version, so bumping a version re-scores
every text once and nothing else.

Adding a scorer: its module (a function under ``@scorer(...)``), its name in the
import list of ``registered`` below, and its tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pyarrow as pa

ArrowFunction = Callable[[pa.Array | pa.ChunkedArray], pa.Array]

LONG_MODEL = "response_scores_text"
"""The score model of every scorer without one of its own: one row per text, scorer and
version, the value in ``score`` (and in ``raw.text_scores.score`` when landed)."""

READS = ("response_text",)
"""What a scorer may read: the text of the response."""


@dataclass(frozen=True)
class Metric:
    """How a scorer's value enters the degradation rule: its row of the metrics (the
    columns of seeds/metrics.csv, whose rows are the metrics no scorer declares)."""

    display_name: str
    """Label for report tables."""
    direction: str
    """'higher_is_better' or 'lower_is_better': which way a score gets worse."""
    description: str
    """What the score measures and where it comes from."""
    scale_min: float | None = None
    """Smallest possible score (None when unbounded)."""
    scale_max: float | None = None
    """Largest possible score (None when unbounded)."""
    truncated_pairs: str = "include"
    """'exclude' when a pair with an answer cut off at the token cap must not enter the rate."""

    def __post_init__(self) -> None:
        if self.direction not in ("higher_is_better", "lower_is_better"):
            raise ValueError(
                f"metric direction {self.direction!r}: use 'higher_is_better' or 'lower_is_better'"
            )
        if self.truncated_pairs not in ("include", "exclude"):
            raise ValueError(
                f"metric truncated_pairs {self.truncated_pairs!r}: use 'include' or 'exclude'"
            )


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
    metric: Metric | None = None
    """Its metric (direction, scale), or None for a scorer that is no metric ('refusal')."""
    model: str = LONG_MODEL
    """The dbt model that holds its scores (LONG_MODEL unless it has a model of its own)."""
    reads: str = "response_text"
    """What the function reads (one of READS)."""

    def __post_init__(self) -> None:
        if self.reads not in READS:
            raise ValueError(
                f"scorer {self.name!r} reads {self.reads!r}; a scorer reads one of {', '.join(READS)}"
            )
        if self.model == LONG_MODEL and (
            self.arguments != ("VARCHAR",) or self.returns not in _NUMERIC
        ):
            raise ValueError(
                f"scorer {self.name!r}: a scorer of {LONG_MODEL} takes the text alone and returns a "
                f"number ({', '.join(_NUMERIC)}); give it a model of its own (model=...) otherwise"
            )

    def version_for(self, model_ref: str | None = None) -> str:
        return self.version(model_ref) if callable(self.version) else self.version


_NUMERIC = ("DOUBLE", "FLOAT", "INTEGER", "BIGINT")

SCORERS: dict[str, Scorer] = {}


def scorer(
    name: str,
    version: str | Callable[[str | None], str],
    sql_function: str,
    returns: str,
    returns_nulls: bool = False,
    arguments: tuple[str, ...] = ("VARCHAR",),
    side_effects: bool = False,
    metric: Metric | None = None,
    model: str = LONG_MODEL,
    reads: str = "response_text",
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
                metric,
                model,
                reads,
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
    from ableaudit.scorers import readability, refusals, regard, vader, verbosity  # noqa: F401

    return SCORERS


def scorer_version(name: str, model_ref: str | None = None) -> str:
    """The version scorer ``name`` writes today."""
    scorers = registered()
    if name not in scorers:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(sorted(scorers))}")
    return scorers[name].version_for(model_ref or None)


def catalog(model_ref: str | None = None) -> str:
    """Every scorer as JSON, in name order: name, version (the Regard classifier's for
    ``model_ref``), sql_function, model, reads and its metric's columns (null for none).
    The plugin exposes it as ``ableaudit_scorer_catalog(model_ref)`` for the SQL that is
    derived from the registry (macro ``registered_scorers``)."""
    rows = []
    for name, entry in sorted(registered().items()):
        row = {
            "name": name,
            "version": entry.version_for(model_ref or None),
            "sql_function": entry.sql_function,
            "model": entry.model,
            "reads": entry.reads,
            "metric": name if entry.metric else None,
        }
        fields = asdict(entry.metric) if entry.metric else dict.fromkeys(asdict(_NO_METRIC))
        rows.append(row | fields)
    return json.dumps(rows)


_NO_METRIC = Metric("", "higher_is_better", "")
