"""The scorer pool: same values, same order, as the scorer in one process."""

from __future__ import annotations

import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.scorers import parallel, vader


@pytest.fixture(autouse=True)
def _fresh_pool():
    yield
    parallel.shutdown()


def _texts(n: int) -> list[str | None]:
    words = "good bad terrible wonderful not very happy sad help never sorry great".split()
    return [
        None if i % 97 == 0 else " ".join(words[(i * k) % len(words)] for k in range(1, 12 + i % 9))
        for i in range(n)
    ]


def test_pool_gives_vaderSentiments_compounds_bit_for_bit_in_order():
    texts = _texts(parallel.MIN_PARALLEL_TEXTS * 2 + 13)
    reference = SentimentIntensityAnalyzer()
    expected = [None if t is None else reference.polarity_scores(t)["compound"] for t in texts]
    assert parallel.map_batches(vader.vader_compound, texts, workers=2) == expected


def test_arrow_scorer_uses_the_pool(monkeypatch):
    import pyarrow as pa

    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    texts = _texts(parallel.MIN_PARALLEL_TEXTS + 1)
    assert vader.vader_compound_arrow(pa.array(texts)).to_pylist() == vader.vader_compound(texts)
    assert parallel._pool is not None and parallel._pool_size == 2


def test_small_batches_and_one_worker_stay_in_process():
    assert parallel.map_batches(
        vader.vader_compound, _texts(10), workers=2
    ) == vader.vader_compound(_texts(10))
    parallel.map_batches(vader.vader_compound, _texts(parallel.MIN_PARALLEL_TEXTS), workers=1)
    assert parallel._pool is None


@pytest.mark.parametrize(("value", "message"), [("two", "not a whole number"), ("0", "at least 1")])
def test_worker_setting_is_checked(monkeypatch, value, message):
    monkeypatch.setenv(parallel.WORKERS_ENV, value)
    with pytest.raises(ValueError, match=message):
        parallel.worker_count()


def test_default_is_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    assert parallel.worker_count() == parallel.available_cores() >= 1
