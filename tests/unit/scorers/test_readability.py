"""Readability is textstat's Flesch reading ease of the whole text, in Python and in SQL."""

from __future__ import annotations

from importlib.metadata import version

import duckdb
import pyarrow as pa
import pytest
import textstat

from ableaudit.dbt.plugin import register_udfs
from ableaudit.scorers.readability import (
    SCORER_VERSION,
    flesch_reading_ease,
    flesch_reading_ease_arrow,
)
from ableaudit.scorers.registry import registered

TEXTS = [
    "The cat sat on the mat.",
    "Notwithstanding considerable institutional heterogeneity, comprehensive accessibility "
    "accommodations necessitate individualized documentation.",
    "You can ask for help. A nurse will come. They will bring water.",
    "",
]


def test_the_score_is_textstats_flesch_reading_ease():
    expected = [textstat.flesch_reading_ease(t) for t in TEXTS]
    assert flesch_reading_ease(TEXTS + [None]) == expected + [None]
    # the short plain sentence reads more easily than the long latinate one
    assert expected[0] > 60 > expected[1]


def test_the_arrow_and_sql_forms_give_the_same_values():
    arrow = flesch_reading_ease_arrow(pa.array(TEXTS + [None]))
    assert arrow.type == pa.float64()
    assert arrow.to_pylist() == [textstat.flesch_reading_ease(t) for t in TEXTS] + [None]
    con = duckdb.connect()
    register_udfs(con)
    got = con.execute(
        "select flesch_reading_ease(t) from unnest(?) as u(t) order by t", [TEXTS]
    ).fetchall()
    assert sorted(v for (v,) in got) == sorted(textstat.flesch_reading_ease(t) for t in TEXTS)


def test_it_is_registered_as_a_metric_where_higher_reads_more_easily():
    entry = registered()["readability"]
    assert entry.version_for() == SCORER_VERSION
    assert SCORER_VERSION == f"flesch-1/textstat-{version('textstat')}"
    assert entry.metric.direction == "higher_is_better"
    assert entry.metric.scale_min is None and entry.metric.scale_max is None
    assert entry.sql_function == "flesch_reading_ease" and not entry.side_effects


@pytest.mark.parametrize("text", ["Short words.", "Extraordinarily incomprehensible verbosity."])
def test_one_text_alone_scores_as_in_a_batch(text):
    assert flesch_reading_ease([text]) == [flesch_reading_ease(TEXTS + [text])[-1]]
