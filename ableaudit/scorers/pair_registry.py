"""The pair scorers, registered by name: the one declaration each pair-level metric has.

A pair scorer (``ableaudit.scorers.pair_declare``) registers an Arrow function of a pair's
two answers that the dbt-duckdb plugin exposes as a SQL function. Everything else is derived
from its declaration, through ``pair_catalog`` (the plugin's ``ableaudit_pair_scorer_catalog``,
read by macro ``registered_pair_scorers``): the model ``stg_registry__pair_scorers`` (the
scorers, their metric rows, which ``stg_seeds__metrics`` adds to the others, their
thresholds and flag rules), the pairs ``response_pair_scores`` scores and caches per
(neutral text hash, disability text hash, scorer, version), their rows of
``int_pair_scores`` and ``int_run_pair_flags``, and their ``pair_details`` columns.

Adding a pair scorer: its function under ``@pair_scorer(...)`` in a module imported by
``registered_pairs`` below, and its tests.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from ableaudit.scorers.pair_declare import PAIR_SCORERS, PairScorer


def registered_pairs() -> dict[str, PairScorer]:
    """Every pair scorer, its modules imported (each registers itself on import)."""
    from ableaudit.scorers import parity, similarity  # noqa: F401

    return PAIR_SCORERS


def pair_scorer_version(name: str, model_ref: str | None = None) -> str:
    """The version pair scorer ``name`` writes today (the cosine's for embedding ``model_ref``)."""
    scorers = registered_pairs()
    if name not in scorers:
        raise ValueError(f"unknown pair scorer {name!r}; known: {', '.join(sorted(scorers))}")
    return scorers[name].version_for(model_ref or None)


def pair_catalog(model_ref: str | None = None) -> str:
    """Every pair scorer as JSON, in name order: name, version (the cosine's for embedding
    ``model_ref``), sql_function, takes_model, threshold, flag_rule, reference and its
    metric's columns."""
    rows = []
    for name, entry in sorted(registered_pairs().items()):
        rows.append(
            {
                "name": name,
                "version": entry.version_for(model_ref or None),
                "sql_function": entry.sql_function,
                "takes_model": entry.takes_model,
                "metric": name,
                "threshold": entry.threshold,
                "flag_rule": entry.flag_rule,
                "reference": entry.reference,
            }
            | asdict(entry.metric)
        )
    return json.dumps(rows)
