"""A pair scorer's declaration: ``@pair_scorer(...)`` over a function of a neutral answer and
its disability-aware answer taken together (how similar they are, or how their sentiment
differs), with its version, its metric (``Metric``: direction, scale, cut-off answers) and
its threshold rule. Each pair scorer module imports this to declare itself;
``ableaudit.scorers.pair_registry`` imports every such module and derives the rest.

A pair scorer's value is cached once per (neutral text hash, disability text hash, scorer,
version) in the dbt model ``response_pair_scores`` and joins every pair x metric of
``int_pair_scores`` as a per-text metric does: two scores per pair, ``neutral_score`` and
``disability_score``. A similarity has one value per pair; its ``neutral_score`` is the
value the neutral answer scores against itself (``reference``: 1 for a cosine or ROUGE-L,
100 for BLEU), its ``disability_score`` the pair's value. A sentiment parity scores each
side on its own (VADER's negative share) and the pair's quantity is their difference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from ableaudit.scorers.declare import Metric, check_flag_rule

PAIR_MODEL = "response_pair_scores"
"""The dbt model that holds every pair scorer's values."""

PAIR_SCORE_TYPE = pa.struct(
    [
        ("neutral_score", pa.float64()),
        ("disability_score", pa.float64()),
        ("status", pa.string()),
        ("reason", pa.string()),
    ]
)
"""What a pair scorer's function returns per pair."""
PAIR_SCORE_SQL_TYPE = (
    "STRUCT(neutral_score DOUBLE, disability_score DOUBLE, status VARCHAR, reason VARCHAR)"
)

PairFunction = Callable[..., pa.Array]
"""Arrow neutral texts, Arrow disability-aware texts (and, for a scorer that ``takes_model``,
the model reference per pair) in; a PAIR_SCORE_TYPE array out, one per pair."""


@dataclass(frozen=True)
class PairScorer:
    name: str
    """The scorer's name, which is its metric's name."""
    version: str | Callable[[str | None], str]
    """Its version; a model-based scorer's depends on the model reference."""
    sql_function: str
    """The SQL function the plugin registers."""
    function: PairFunction
    """The pairs' texts in, one PAIR_SCORE_TYPE value per pair out."""
    metric: Metric
    """Its metric's display name, direction, description, scale and cut-off rule."""
    threshold: float
    """The default threshold of its flag rule (var ``pair_metric_thresholds`` overrides it)."""
    flag_rule: str
    """One of FLAG_RULES (ableaudit.scorers.declare), for the metric's direction."""
    reference: float | None = None
    """A similarity's value for an answer against itself (its ``neutral_score``); None for a
    scorer that scores each side."""
    takes_model: bool = False
    """Whether the SQL function takes a model reference (var ``similarity_model``) third."""

    def __post_init__(self) -> None:
        check_flag_rule("pair scorer", self.name, self.flag_rule, self.metric.direction)

    def version_for(self, model_ref: str | None = None) -> str:
        return self.version(model_ref) if callable(self.version) else self.version

    @property
    def arguments(self) -> tuple[str, ...]:
        """The SQL types of its arguments: both texts, then the model reference if it takes one."""
        return ("VARCHAR", "VARCHAR", "VARCHAR") if self.takes_model else ("VARCHAR", "VARCHAR")


PAIR_SCORERS: dict[str, PairScorer] = {}


def pair_scorer(
    name: str,
    version: str | Callable[[str | None], str],
    sql_function: str,
    metric: Metric,
    threshold: float,
    flag_rule: str,
    reference: float | None = None,
    takes_model: bool = False,
) -> Callable[[PairFunction], PairFunction]:
    """Register an Arrow function of a pair's two texts as pair scorer ``name``."""

    def register(function: PairFunction) -> PairFunction:
        add_pair_scorer(
            PairScorer(
                name,
                version,
                sql_function,
                function,
                metric,
                threshold,
                flag_rule,
                reference,
                takes_model,
            )
        )
        return function

    return register


def add_pair_scorer(entry: PairScorer) -> None:
    """Register ``entry`` (what ``@pair_scorer`` does; a module that declares several entries
    over one function, such as the sentiment parities of each sentiment scorer, calls it)."""
    if entry.name in PAIR_SCORERS and PAIR_SCORERS[entry.name] != entry:
        raise ValueError(f"pair scorer {entry.name!r} is registered twice")
    PAIR_SCORERS[entry.name] = entry


def pair_scores(
    neutral: list[float | None],
    disability: list[float | None],
    status: list[str] | None = None,
    reason: list[str | None] | None = None,
) -> pa.Array:
    """The PAIR_SCORE_TYPE array of per-pair values (status 'ok' unless given)."""
    n = len(neutral)
    return pa.array(
        [
            {
                "neutral_score": neutral[i],
                "disability_score": disability[i],
                "status": "ok" if status is None else status[i],
                "reason": None if reason is None else reason[i],
            }
            for i in range(n)
        ],
        type=PAIR_SCORE_TYPE,
    )
