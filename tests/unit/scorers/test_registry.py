"""Scorers are registered by name with their SQL function and version; the plugin registers what the registry holds."""

from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path

import duckdb
import pytest

from ableaudit.dbt.plugin import register_udfs
from ableaudit.scorers import readability, refusals, regard, vader, verbosity
from ableaudit.scorers.registry import (
    LONG_MODEL,
    Metric,
    Scorer,
    catalog,
    registered,
    scorer_version,
)

ROOT = Path(__file__).resolve().parents[3]


def test_every_scorer_is_registered_with_its_version():
    scorers = registered()
    assert set(scorers) >= {"vader", "verbosity", "refusal", "regard", "readability"}
    assert scorer_version("readability") == readability.SCORER_VERSION
    assert scorer_version("vader") == vader.SCORER_VERSION
    assert scorer_version("verbosity") == verbosity.SCORER_VERSION
    assert scorer_version("refusal") == refusals.RULESET_VERSION
    assert scorer_version("regard", "some/classifier") == regard.scorer_version("some/classifier")
    assert scorers["regard"].sql_function == "regard_score" and scorers["regard"].side_effects
    with pytest.raises(
        ValueError,
        match=f"unknown scorer 'tone'; known: {', '.join(sorted(scorers))}$",
    ):
        scorer_version("tone")


def test_the_plugin_exposes_every_per_text_scorer_in_sql():
    con = duckdb.connect()
    register_udfs(con)
    row = con.execute(
        "select vader_compound('I love it'), word_count('three small words'), "
        "refusal_rule('Nice weather.'), ableaudit_scorer_version('verbosity', ''), "
        "flesch_reading_ease('The cat sat on the mat.'), ableaudit_scorer_catalog('')"
    ).fetchone()
    assert row[0] == pytest.approx(vader.vader_compound(["I love it"])[0])
    assert row[1:4] == (3, None, verbosity.SCORER_VERSION)
    assert row[4] == readability.flesch_reading_ease(["The cat sat on the mat."])[0]
    assert row[5] == catalog("")


def test_the_seed_holds_only_the_metrics_no_scorer_declares():
    """The registry is the one source of a scorer's metric: the seed has no row for one."""
    with open(ROOT / "seeds" / "metrics.csv", newline="") as f:
        seeded = {row["metric"] for row in csv.DictReader(f)}
    declared = {name for name, entry in registered().items() if entry.metric}
    assert declared >= {"vader", "regard", "verbosity", "readability"}
    assert seeded == {"judge_score"}
    assert not seeded & set(registered())


def test_the_catalog_gives_every_scorer_its_declaration():
    rows = {row["name"]: row for row in json.loads(catalog("some/classifier"))}
    assert set(rows) == set(registered())
    for name, entry in registered().items():
        row = rows[name]
        assert row["version"] == entry.version_for("some/classifier")
        assert (row["sql_function"], row["model"], row["reads"]) == (
            entry.sql_function,
            entry.model,
            entry.reads,
        )
        assert row["metric"] == (name if entry.metric else None)
        assert row["masks"] == entry.masks
        assert row["direction"] == (entry.metric.direction if entry.metric else None)
    assert rows["readability"]["model"] == LONG_MODEL
    assert rows["readability"]["direction"] == "higher_is_better"
    assert rows["verbosity"]["truncated_pairs"] == "exclude"
    assert rows["refusal"]["metric"] is None
    assert (rows["vader_masked"]["masks"], rows["vader_masked"]["model"]) == (
        "vader",
        "response_scores_masked",
    )
    assert rows["vader"]["masks"] is None


def test_a_declaration_that_cannot_be_derived_is_refused():
    with pytest.raises(ValueError, match="'higher_is_better' or 'lower_is_better'"):
        Metric("X", "up", "x")
    with pytest.raises(ValueError, match="reads 'image'"):
        Scorer("x", "1", "x_fn", reads="image")
    with pytest.raises(ValueError, match="give it a model of its own"):
        Scorer("x", "1", "x_fn", returns="VARCHAR")
    # a masked scorer names what it masks and takes the masked scorers' arguments
    with pytest.raises(ValueError, match="names the scorer it masks"):
        Scorer("x", "1", "x_fn", reads="response_text_and_mask")
    with pytest.raises(ValueError, match="names the scorer it masks"):
        Scorer("x", "1", "x_fn", masks="vader")
    masked = registered()["vader_masked"]
    assert (
        Scorer(
            "x",
            "1",
            "x_fn",
            **{k: getattr(masked, k) for k in ("arguments", "returns", "model", "reads", "masks")},
        ).masks
        == "vader"
    )


def test_every_module_that_declares_a_scorer_is_registered():
    """A module with a ``@scorer(...)`` declaration left out of ``registered``'s import list
    would never be scored (read from the sources, whatever this process imported)."""
    folder = ROOT / "ableaudit" / "scorers"
    declaring = {
        p.stem
        for p in folder.glob("*.py")
        if p.stem not in ("registry", "declare")
        and re.search(r"^@scorer\(", p.read_text(), re.MULTILINE)
    }
    tree = ast.parse((folder / "registry.py").read_text())
    (function,) = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "registered"
    ]
    listed = {
        alias.name
        for node in ast.walk(function)
        if isinstance(node, ast.ImportFrom) and node.module == "ableaudit.scorers"
        for alias in node.names
    }
    assert "readability" in declaring
    assert declaring == listed
    con = duckdb.connect()
    register_udfs(con)
    functions = {
        r[0] for r in con.execute("select function_name from duckdb_functions()").fetchall()
    }
    assert {e.sql_function for e in registered().values()} <= functions
