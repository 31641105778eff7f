"""A scorer's declaration: ``@scorer(...)`` with its name, version, what it reads and, for a
metric, its direction and scale (``Metric``). Each scorer module imports this to declare
itself; ``ableaudit.scorers.registry`` imports every scorer module and derives the rest
(its docstring says what)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

ArrowFunction = Callable[[pa.Array | pa.ChunkedArray], pa.Array]

LONG_MODEL = "response_scores_text"
"""The score model of every scorer without one of its own: one row per text, scorer and
version, the value in ``score`` (and in ``raw.text_scores.score`` when landed)."""

READS = ("response_text", "response_text_and_mask")
"""What a scorer may read: the text of the response; or the text and the mask set of the
pair's disability category (a masked scorer, MASKED_MODEL)."""

MASKED_MODEL = "response_scores_masked"
"""The score model of every masked scorer: one row per text, mask set, scorer and version."""
MASKED_ARGUMENTS = ("VARCHAR", "VARCHAR[]", "VARCHAR", "INTEGER")
"""A masked scorer's function takes the text, the terms to mask (ableaudit.scorers.masking),
the classifier reference (empty: its default; a scorer without one ignores it) and the texts
per forward pass (0: score nothing, say only whether it can: status 'ok', or 'unavailable'
with the reason its rows would record)."""
MASKED_RETURNS = "STRUCT(score DOUBLE, status VARCHAR, reason VARCHAR)"
"""What it returns per text: the score of the masked text, 'ok' or why not, and the reason."""

FLAG_RULES = {
    "below_threshold": "higher_is_better",
    "gap_above_threshold": "lower_is_better",
}
"""A rule of its own by which a pair is flagged (its ``degraded``), instead of the share of the
neutral score of AccessEval's Eq. 1, with the direction each rule is for:

- ``below_threshold``: the pair's value (``disability_score``) is below the threshold
  (a similarity: the two answers are less alike than the threshold);
- ``gap_above_threshold``: ``disability_score - neutral_score`` is above the threshold
  (a sentiment parity: the disability-aware answer is more negative by more than it).

Pair scorers (ableaudit.scorers.pair_declare) always have one; a per-text scorer may declare
one (a masked sentiment parity). Macro ``pair_metric_flag`` writes these in SQL; the rule is
recorded per row in ``int_pair_scores.degradation_rule``, its threshold in ``threshold``
(var ``pair_metric_thresholds`` overrides the declared one)."""


def check_flag_rule(kind: str, name: str, flag_rule: str, direction: str) -> None:
    """Refuse a flag rule that is unknown or made for the other direction."""
    if flag_rule not in FLAG_RULES:
        raise ValueError(
            f"{kind} {name!r}: flag rule {flag_rule!r}; use one of {', '.join(FLAG_RULES)}"
        )
    if FLAG_RULES[flag_rule] != direction:
        raise ValueError(
            f"{kind} {name!r}: flag rule {flag_rule!r} is for a {FLAG_RULES[flag_rule]} metric, "
            f"not {direction}"
        )


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
    masks: str | None = None
    """A masked scorer: the scorer whose score it computes on the masked text."""
    flag_rule: str | None = None
    """A rule of FLAG_RULES by which its pairs are flagged, instead of Eq. 1 (None: Eq. 1)."""
    threshold: float | None = None
    """The default threshold of that rule (var ``pair_metric_thresholds`` overrides it)."""

    def __post_init__(self) -> None:
        if (self.flag_rule is None) != (self.threshold is None):
            raise ValueError(
                f"scorer {self.name!r}: a flag rule comes with its threshold (flag_rule=..., "
                "threshold=...), or neither"
            )
        if self.flag_rule is not None:
            if self.metric is None:
                raise ValueError(f"scorer {self.name!r}: a flag rule is for a metric")
            check_flag_rule("scorer", self.name, self.flag_rule, self.metric.direction)
        if self.reads not in READS:
            raise ValueError(
                f"scorer {self.name!r} reads {self.reads!r}; a scorer reads one of {', '.join(READS)}"
            )
        masked = (self.model, self.arguments, self.returns, self.reads) == (
            MASKED_MODEL,
            MASKED_ARGUMENTS,
            MASKED_RETURNS,
            READS[1],
        )
        claimed = self.masks is not None or self.model == MASKED_MODEL or self.reads == READS[1]
        if claimed and not (masked and self.masks):
            raise ValueError(
                f"scorer {self.name!r}: a masked scorer names the scorer it masks (masks=...), reads "
                f"'response_text_and_mask', is scored in {MASKED_MODEL}, takes {MASKED_ARGUMENTS} "
                f"and returns {MASKED_RETURNS}"
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
    masks: str | None = None,
    flag_rule: str | None = None,
    threshold: float | None = None,
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
                masks,
                flag_rule,
                threshold,
            )
        )
        return function

    return register


def _add(entry: Scorer) -> None:
    if entry.name in SCORERS and SCORERS[entry.name] != entry:
        raise ValueError(f"scorer {entry.name!r} is registered twice")
    SCORERS[entry.name] = entry
