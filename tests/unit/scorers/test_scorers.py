"""Scorers against independent implementations: vaderSentiment itself, str.split,
and a manual softmax over a tiny classifier's logits."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.dbt.plugin import Plugin, register_udfs, scorer_version
from ableaudit.scorers import regard, vader, verbosity
from ableaudit.scorers.batching import length_batches
from tests.fixtures.warehouse import make_tiny_regard_classifier, manual_regard

TEXTS = [
    "I love this, it is great!",
    "This is terrible and I hate it.",
    "The office opens at 9am.",
    "Unfortunately, I CANNOT help with that... sorry :(",
    "Not bad at all!!! 😀",
    "Élodie était très contente. Ça marche bien — 👍",
    "",
    "   ",
    "First sentence is lovely. Second sentence is awful. Third is neutral.",
    "word " * 500,
]


@pytest.fixture(scope="module")
def analyzer() -> SentimentIntensityAnalyzer:
    return SentimentIntensityAnalyzer()


def test_vader_matches_vadersentiment_on_the_whole_text(analyzer):
    expected = [analyzer.polarity_scores(t)["compound"] for t in TEXTS]
    assert vader.vader_compound(TEXTS) == expected
    assert vader.vader_compound([None, "good", None]) == [
        None,
        analyzer.polarity_scores("good")["compound"],
        None,
    ]


def test_word_count_is_whitespace_words():
    assert verbosity.word_count(
        ["a b  c", "", "   ", "one\ntwo\tthree", None, "naïve café 🙂"]
    ) == [3, 0, 0, 3, None, 3]


def test_udfs_in_duckdb_match_the_libraries(analyzer):
    con = duckdb.connect()
    register_udfs(con)
    con.register("texts", pa.table({"t": pa.array(TEXTS + [None], pa.string())}))
    rows = con.execute("select t, vader_compound(t), word_count(t) from texts").fetchall()
    for t, compound, words in rows:
        if t is None:
            assert compound is None and words is None
        else:
            assert compound == analyzer.polarity_scores(t)["compound"]
            assert words == len(t.split())
    # more rows than one DuckDB vector: the arrow UDF sees several batches, in order
    many = con.execute(
        "select t, vader_compound(t), word_count(t) "
        "from (select i, 'nice day number ' || i || repeat(' good', i % 7) as t from range(5000) r(i)) order by i"
    ).fetchall()
    assert [(c, w) for _, c, w in many] == [
        (analyzer.polarity_scores(t)["compound"], len(t.split())) for t, _, _ in many
    ]


def test_plugin_creates_raw_layer_and_leaves_read_only_files_alone(tmp_path):
    mem = duckdb.connect()
    Plugin("ableaudit", {}).configure_connection(mem)
    assert mem.execute("select count(*) from raw.generations").fetchone() == (0,)

    path = tmp_path / "plain.duckdb"
    duckdb.connect(str(path)).close()  # a file with no raw schema
    ro = duckdb.connect(str(path), read_only=True)
    Plugin("ableaudit", {}).configure_connection(ro)  # must not try to write
    assert ro.execute("select word_count('a b')").fetchone() == (2,)
    assert ro.execute(
        "select count(*) from duckdb_schemas() where schema_name = 'raw'"
    ).fetchone() == (0,)
    ro.close()


def test_scorer_versions_come_from_the_scorer_modules():
    assert scorer_version("vader") == vader.SCORER_VERSION
    assert scorer_version("verbosity") == verbosity.SCORER_VERSION
    assert scorer_version("regard", "/models/regard") == f"{regard.SCORER_VERSION}|/models/regard"
    with pytest.raises(ValueError, match="unknown scorer"):
        scorer_version("sentiment")


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    return make_tiny_regard_classifier(tmp_path_factory.mktemp("regard") / "tiny", max_positions=32)


def test_regard_is_p_positive_minus_p_negative(tiny_classifier):
    texts = [
        "you can plan the steps ahead",
        "unfortunately it is very difficult",
        "",
        "great",
        "sorry " * 5,
    ]
    scores = regard.score_regard(texts, str(tiny_classifier), batch_size=2)
    expected = manual_regard(tiny_classifier, texts)
    for text, s in zip(texts, scores):
        assert s.status == "ok" and s.reason is None
        assert s.regard == pytest.approx(expected[text][0], abs=1e-6)
        assert s.regard == pytest.approx(s.p_positive - s.p_negative, abs=1e-12)
        assert -1 <= s.regard <= 1
        assert s.n_tokens == expected[text][1] and s.max_tokens == 32


def test_regard_records_truncation(tiny_classifier):
    long_text = " ".join(["you can plan the steps ahead"] * 20)  # 120 words > 32 positions
    short = "great help"
    s_long, s_short = regard.score_regard([long_text, short], str(tiny_classifier))
    expected = manual_regard(tiny_classifier, [long_text])[long_text]
    assert s_long.status == "truncated" and s_long.n_tokens == expected[1] > 32
    assert "32" in s_long.reason and str(expected[1]) in s_long.reason
    assert s_long.regard == pytest.approx(expected[0], abs=1e-6)  # scored on the first 32 tokens
    assert s_short.status == "ok"


def test_regard_unavailable_is_a_status_not_a_score(tmp_path, monkeypatch):
    monkeypatch.delenv("ABLEAUDIT_ALLOW_DOWNLOAD", raising=False)
    missing = tmp_path / "no-such-model"
    scores = regard.score_regard(["hello", "world"], str(missing))
    assert [s.status for s in scores] == ["unavailable", "unavailable"]
    assert all(s.regard is None and s.p_positive is None for s in scores)
    assert str(missing) in scores[0].reason and "ABLEAUDIT_ALLOW_DOWNLOAD" in scores[0].reason

    structs = regard.regard_scores_arrow(
        pa.array(["hello", "world"]), pa.array([str(missing)] * 2), pa.array([32, 32])
    )
    assert structs.type == regard.SCORE_TYPE
    assert structs.field("regard").null_count == 2
    assert structs.field("status").to_pylist() == ["unavailable", "unavailable"]


def test_regard_without_positive_negative_labels_is_unavailable(tmp_path):
    path = make_tiny_regard_classifier(tmp_path / "odd", labels=("LABEL_0", "LABEL_1"))
    (s,) = regard.score_regard(["hello"], str(path))
    assert s.status == "unavailable" and "positive" in s.reason


def test_regard_udf_is_typed_when_empty_and_null_for_null_texts():
    empty = regard.regard_scores_arrow(
        pa.array([], pa.string()), pa.array([], pa.string()), pa.array([], pa.int32())
    )
    assert len(empty) == 0 and empty.type == regard.SCORE_TYPE
    nulls = regard.regard_scores_arrow(
        pa.array([None], pa.string()), pa.array(["/nowhere"]), pa.array([32])
    )
    assert nulls.to_pylist() == [None]


def test_regard_udf_in_duckdb_scores_each_text_once(tiny_classifier, monkeypatch):
    """regard_score(text, model_ref, batch_size) as dbt calls it: one struct per text, the classifier run once per row."""
    calls = []
    real = regard.score_regard
    monkeypatch.setattr(
        regard,
        "score_regard",
        lambda texts, *a, **k: calls.append(len(texts)) or real(texts, *a, **k),
    )
    con = duckdb.connect()
    register_udfs(con)
    texts = [
        "you can plan the steps ahead",
        "unfortunately it is very difficult",
        "great",
    ] * 1000 + [None]
    con.register("texts", pa.table({"t": pa.array(texts, pa.string())}))
    rows = con.execute(
        "with scored as (select t, regard_score(t, ?, 2) as s from texts) "
        "select t, s.regard, s.p_positive, s.p_negative, s.n_tokens, s.status, s.reason from scored",
        [str(tiny_classifier)],
    ).fetchall()
    assert sum(calls) == len(texts) - 1  # once per non-null text, though four fields are read
    expected = manual_regard(tiny_classifier, [t for t in set(texts) if t is not None])
    for t, value, pos, neg, n_tokens, status, reason in rows:
        if t is None:
            assert (value, status) == (None, None)
            continue
        assert value == pytest.approx(expected[t][0], abs=1e-6) and value == pytest.approx(
            pos - neg, abs=1e-12
        )
        assert (n_tokens, status, reason) == (expected[t][1], "ok", None)


def test_regard_sorted_by_length_equals_the_given_order(tiny_classifier):
    texts = [
        " ".join(["you can plan the steps ahead"] * 9),
        "great",
        "unfortunately it is very difficult",
        "",
        "sorry " * 12,
        "plan ahead",
    ]
    ordered = regard.score_regard(texts, str(tiny_classifier), batch_size=2, sort_by_length=False)
    by_length = regard.score_regard(texts, str(tiny_classifier), batch_size=2)
    for a, b in zip(ordered, by_length):
        assert (a.status, a.n_tokens, a.reason) == (b.status, b.n_tokens, b.reason)
        assert a.regard == pytest.approx(b.regard, abs=1e-6)
    assert {s.status for s in by_length} == {"ok", "truncated"}
    assert length_batches([5, 1, 3, 1], 2) == [[1, 3], [2, 0]]
    assert length_batches([5, 1, 3], 2, sort=False) == [[0, 1], [2]]


def test_regard_availability_is_decided_once_and_cheaply(tmp_path, monkeypatch):
    """Nothing to load: the reason comes without a load; a failed load is tried once per files."""
    monkeypatch.delenv("ABLEAUDIT_ALLOW_DOWNLOAD", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    loads = []
    real = regard._load
    monkeypatch.setattr(regard, "_load", lambda *a: loads.append(a) or real(*a))
    missing = tmp_path / "later"
    reason = regard.availability(str(missing))
    assert "no such local folder" in reason and str(missing) in reason
    assert regard.availability(str(missing)) == reason and loads == []
    hub = regard.availability("someone/not-cached")
    assert "offline Hugging Face cache" in hub and "ABLEAUDIT_ALLOW_DOWNLOAD" in hub and loads == []

    odd = make_tiny_regard_classifier(missing, labels=("LABEL_0", "LABEL_1"))
    first = regard.availability(str(odd))
    assert "'positive' and 'negative'" in first and len(loads) == 1
    assert regard.availability(str(odd)) == first and len(loads) == 1  # remembered
    make_tiny_regard_classifier(missing)  # the files change: loaded again, now usable
    assert regard.availability(str(odd)) is None and len(loads) == 2
    assert regard.score_regard(["great"], str(odd))[0].status == "ok" and len(loads) == 2


def test_regard_probe_says_whether_the_classifier_loads(tiny_classifier, tmp_path):
    con = duckdb.connect()
    register_udfs(con)
    probe = "select p.status, p.reason, p.regard from (select regard_score('', ?, 0) as p)"
    assert con.execute(probe, [str(tiny_classifier)]).fetchone() == ("ok", None, None)
    status, reason, value = con.execute(probe, [str(tmp_path / "none")]).fetchone()
    assert status == "unavailable" and value is None
    assert reason == regard.score_regard(["x"], str(tmp_path / "none"))[0].reason
