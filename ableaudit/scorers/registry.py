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
from dataclasses import asdict

from ableaudit.scorers.declare import (  # noqa: F401  (the names scorers and callers use)
    LONG_MODEL,
    MASKED_MODEL,
    READS,
    SCORERS,
    ArrowFunction,
    Metric,
    Scorer,
    scorer,
)


def registered() -> dict[str, Scorer]:
    """Every scorer, its modules imported (each registers itself on import)."""
    from ableaudit.scorers import (  # noqa: F401
        masked,
        readability,
        refusals,
        regard,
        vader,
        verbosity,
    )

    return SCORERS


def scorer_version(name: str, model_ref: str | None = None) -> str:
    """The version scorer ``name`` writes today."""
    scorers = registered()
    if name not in scorers:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(sorted(scorers))}")
    return scorers[name].version_for(model_ref or None)


def catalog(model_ref: str | None = None) -> str:
    """Every scorer as JSON, in name order: name, version (the Regard classifier's for
    ``model_ref``), sql_function, model, reads, masks (a masked scorer: the scorer it masks),
    flag_rule and threshold (a rule of its own, else null) and its metric's columns (null for
    none).
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
            "masks": entry.masks,
            "metric": name if entry.metric else None,
            "flag_rule": entry.flag_rule,
            "threshold": entry.threshold,
        }
        fields = asdict(entry.metric) if entry.metric else dict.fromkeys(asdict(_NO_METRIC))
        rows.append(row | fields)
    return json.dumps(rows)


_NO_METRIC = Metric("", "higher_is_better", "")
