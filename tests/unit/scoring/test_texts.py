"""The scoring flow's parts free of Prefect: which texts are pending, reading them in
batches, scoring a batch with the registered scorers, and landing the scores."""

from __future__ import annotations

import hashlib

import duckdb
import pyarrow as pa
import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.scorers.registry import scorer_version
from ableaudit.scoring import runners, texts
from ableaudit.warehouse import connect
from ableaudit.warehouse.forgetting import forget, history
from ableaudit.warehouse.landing import land_text_scores
from tests.fixtures.warehouse import land, read, synthetic_generations


@pytest.fixture
def wh(warehouse):
    connect(warehouse).close()
    land(warehouse, synthetic_generations())
    return warehouse


def distinct_texts(wh) -> dict[str, str]:
    frame = read(
        wh, "select distinct response_text from raw.generations where response_text is not null"
    )
    return {hashlib.sha256(t.encode()).hexdigest(): t for t in frame.response_text}


def test_every_distinct_text_is_pending_once_in_hash_order(wh):
    pending = texts.pending_texts(wh, ["vader", "verbosity"])
    expected = distinct_texts(wh)
    hashes = pending.keys["text_hash"].to_pylist()
    assert hashes == sorted(expected) and len(hashes) < len(synthetic_generations())
    assert pending.count("vader") == pending.count("verbosity") == len(expected)
    assert pending.versions == {n: scorer_version(n) for n in ("vader", "verbosity")}


def test_read_batches_gives_each_text_once_in_batches_of_the_size(wh):
    pending = texts.pending_texts(wh, ["vader"])
    batches = list(texts.read_batches(wh, pending.keys, 16))
    assert [b.num_rows for b in batches[:-1]] == [16] * (len(batches) - 1)
    assert 0 < batches[-1].num_rows <= 16
    got = {
        h: t
        for b in batches
        for h, t in zip(b["text_hash"].to_pylist(), b["response_text"].to_pylist())
    }
    assert got == distinct_texts(wh)
    duckdb.connect(str(wh)).close()  # the read-only connections are closed: a writer may open it


def test_scores_equal_the_libraries_and_land_once(wh):
    pending = texts.pending_texts(wh, ["vader", "verbosity", "refusal"])
    (batch,) = texts.read_batches(wh, pending.keys, 10_000)
    analyzer = SentimentIntensityAnalyzer()
    vader = texts.score_batch("vader", batch)
    assert vader["vader_compound"].to_pylist() == [
        analyzer.polarity_scores(t)["compound"] for t in batch["response_text"].to_pylist()
    ]
    words = texts.score_batch("verbosity", batch, in_process=True)
    assert words["word_count"].to_pylist() == [
        len(t.split()) for t in batch["response_text"].to_pylist()
    ]
    refusal = texts.score_batch("refusal", batch)
    assert set(refusal["status"].to_pylist()) == {"ok"}
    scores = pa.concat_tables([vader, words, refusal], promote_options="permissive")

    first = land_text_scores(wh, scores)
    assert (first.inserted, first.unchanged) == (3 * batch.num_rows, 0)
    again = land_text_scores(wh, scores)
    assert (again.inserted, again.unchanged) == (0, 3 * batch.num_rows)
    assert texts.pending_texts(wh, ["vader", "verbosity", "refusal"]).keys.num_rows == 0
    landed = read(wh, "select * from raw.text_scores where scorer = 'vader' order by text_hash")
    assert (
        landed.vader_compound.tolist() == vader.sort_by("text_hash")["vader_compound"].to_pylist()
    )

    (landing,) = [h for h in history(wh) if h["kind"] == "score" and h["rows"]]
    assert landing["rows"] == {"text_scores": 3 * batch.num_rows}
    forget(wh, landing["landing_id"])
    assert read(wh, "select count(*) as n from raw.text_scores").n[0] == 0
    assert texts.pending_texts(wh, ["vader"]).count("vader") == batch.num_rows


def test_a_text_in_the_score_model_is_not_pending_for_that_scorer(wh):
    hashes = sorted(distinct_texts(wh))
    con = duckdb.connect(str(wh))
    con.execute(
        "create table main.response_scores_vader as select unnest(?::varchar[]) as text_hash, "
        "? as scorer_version, 'ok' as status",
        [hashes[:5], scorer_version("vader")],
    )
    con.execute(
        "insert into main.response_scores_vader values (?, 'an older version', 'ok')",
        [hashes[5]],
    )
    # a row that is no final result (Regard's 'unavailable') leaves its text to score
    con.execute(
        "insert into main.response_scores_vader values (?, ?, 'unavailable')",
        [hashes[6], scorer_version("vader")],
    )
    con.close()
    pending = texts.pending_texts(wh, ["vader", "verbosity"])
    assert pending.count("vader") == len(hashes) - 5
    assert pending.count("verbosity") == len(hashes)


def test_a_scorer_the_flow_cannot_score_or_a_runner_it_does_not_know_is_refused():
    assert texts.check_scorers(["regard"]) == ["regard"]
    with pytest.raises(texts.ScoringError, match="unknown scorer 'vadr'"):
        texts.check_scorers(["vadr"])
    assert texts.check_scorers(["vader", "vader", "refusal"]) == ["vader", "refusal"]
    # a masked scorer reads a text with its pair's mask set: the build scores it
    with pytest.raises(texts.ScoringError, match="'vader_masked'.*`ableaudit build`"):
        texts.check_scorers(["vader_masked"])
    assert "vader_masked" not in texts.default_scorers() + tuple(texts.scorer_models())
    with pytest.raises(runners.RunnerError, match="unknown task runner 'ray'.*thread"):
        runners.runner("ray")
    with pytest.raises(runners.RunnerError, match="Dask scheduler"):
        runners.runner("thread").make(1, "tcp://127.0.0.1:8786")


def test_the_dask_runner_needs_prefect_dask_or_builds_a_local_cluster_runner():
    try:
        import prefect_dask  # noqa: F401
    except ImportError:
        with pytest.raises(runners.RunnerError, match="prefect-dask"):
            runners.runner("dask").make(2, None)
        return
    made = runners.runner("dask").make(2, None)
    assert made.cluster_kwargs == {
        "n_workers": 2,
        "threads_per_worker": 1,
        "processes": True,
        "dashboard_address": None,
    }


def test_a_regard_score_that_is_not_final_never_lands(wh, monkeypatch, tmp_path):
    monkeypatch.setenv("ABLEAUDIT_REGARD_MODEL", str(tmp_path / "no-classifier-here"))
    pending = texts.pending_texts(wh, ["vader"])
    (batch,) = texts.read_batches(wh, pending.keys.slice(0, 5), 5)
    assert texts.score_batch("regard", batch).num_rows == 0  # 'unavailable': left for a retry
