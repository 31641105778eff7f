"""Scorers are registered by name with their SQL function and version; the plugin registers what the registry holds."""

from __future__ import annotations

import duckdb
import pytest

from ableaudit.dbt.plugin import register_udfs
from ableaudit.scorers import refusals, regard, vader, verbosity
from ableaudit.scorers.registry import registered, scorer_version


def test_every_scorer_is_registered_with_its_version():
    scorers = registered()
    assert set(scorers) == {"vader", "verbosity", "refusal", "regard"}
    assert scorer_version("vader") == vader.SCORER_VERSION
    assert scorer_version("verbosity") == verbosity.SCORER_VERSION
    assert scorer_version("refusal") == refusals.RULESET_VERSION
    assert scorer_version("regard", "some/classifier") == regard.scorer_version("some/classifier")
    assert scorers["regard"].sql_function == "regard_score" and scorers["regard"].side_effects
    with pytest.raises(
        ValueError, match="unknown scorer 'tone'; known: refusal, regard, vader, verbosity"
    ):
        scorer_version("tone")


def test_the_plugin_exposes_every_per_text_scorer_in_sql():
    con = duckdb.connect()
    register_udfs(con)
    row = con.execute(
        "select vader_compound('I love it'), word_count('three small words'), "
        "refusal_rule('Nice weather.'), ableaudit_scorer_version('verbosity', '')"
    ).fetchone()
    assert row[0] == pytest.approx(vader.vader_compound(["I love it"])[0])
    assert row[1:] == (3, None, verbosity.SCORER_VERSION)
