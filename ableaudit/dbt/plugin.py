"""dbt-duckdb plugin: the raw layer and the scorer UDFs on every dbt connection.

profiles.yml lists ``plugins: [{module: ableaudit.dbt.plugin}]``. This module
only wires: the scoring logic lives in ``ableaudit.scorers``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from dbt.adapters.duckdb.plugins import BasePlugin

from ableaudit.scorers import refusals
from ableaudit.scorers import regard, vader, verbosity
from ableaudit.warehouse import ensure_raw_schema

# "refusal" is the refusal rule set (ableaudit.scorers.refusals): versioned and cached per text like a scorer.
_VERSIONS = {
    "vader": vader.SCORER_VERSION,
    "verbosity": verbosity.SCORER_VERSION,
    "refusal": refusals.RULESET_VERSION,
}


def scorer_version(scorer: str, model_ref: str | None = None) -> str:
    """The version a scorer writes today; regard's depends on the classifier used."""
    if scorer == "regard":
        return regard.scorer_version(regard.model_reference(model_ref or None))
    if scorer not in _VERSIONS:
        raise ValueError(f"unknown scorer {scorer!r}; known: regard, {', '.join(sorted(_VERSIONS))}")
    return _VERSIONS[scorer]


def register_udfs(conn: duckdb.DuckDBPyConnection) -> None:
    """Register the scorer UDFs (also usable outside dbt, e.g. in tests or notebooks)."""
    varchar, double, integer = (duckdb.sqltype(t) for t in ("VARCHAR", "DOUBLE", "INTEGER"))
    conn.create_function("vader_compound", vader.vader_compound_arrow, [varchar], double, type="arrow")
    conn.create_function("word_count", verbosity.word_count_arrow, [varchar], integer, type="arrow")
    # the id of the refusal rule a text matches, null when none ("special": the function returns nulls)
    conn.create_function(
        "refusal_rule", refusals.refusal_rules_arrow, [varchar], varchar, type="arrow", null_handling="special"
    )
    conn.create_function("ableaudit_scorer_version", scorer_version, [varchar, varchar], varchar)
    # regard_score(text, model_ref, batch_size): the classifier's struct per text ("special": null in, null out;
    # side effects: it loads a model and must run once per row, never folded or repeated)
    conn.create_function(
        "regard_score", regard.regard_scores_arrow, [varchar, varchar, integer], duckdb.sqltype(regard.SCORE_SQL_TYPE),
        type="arrow", null_handling="special", side_effects=True,
    )


def _is_read_only(conn: duckdb.DuckDBPyConnection) -> bool:
    rows = conn.execute(
        "select readonly from duckdb_databases() where database_name = current_database()"
    ).fetchall()  # fetchall: DuckDB 2 refuses new work while a result is half read
    return bool(rows and rows[0][0])


class Plugin(BasePlugin):
    def update_connection_config(self, creds: Any, config: dict[str, Any]) -> None:
        # DuckDB creates the file but not its folder: `dbt build` on a fresh clone
        # must not fail because warehouse/ does not exist yet.
        path = getattr(creds, "path", None) or ":memory:"
        if path != ":memory:" and "://" not in path and not path.startswith("md:"):
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)

    def configure_connection(self, conn: duckdb.DuckDBPyConnection) -> None:
        if not _is_read_only(conn):
            ensure_raw_schema(conn)
        register_udfs(conn)
