"""VADER compound sentiment of a whole response (AccessEval section 3.4, metric 1).

The compound score is computed on the complete text, never per sentence and
averaged, so it matches what ``vaderSentiment`` itself returns for the response.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from importlib.metadata import version

import pyarrow as pa

from ableaudit.scorers.declare import Metric, scorer
from ableaudit.scorers.parallel import map_batches

# Bump the prefix when this wrapper changes what it feeds VADER; the library
# version is part of it, so upgrading vaderSentiment re-scores every text once.
SCORER_VERSION = f"vader-1/vaderSentiment-{version('vaderSentiment')}"


@lru_cache(maxsize=1)
def _analyzer():
    # Loading the lexicon takes ~50 ms: once per process, not once per call.
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def vader_compound(texts: Iterable[str | None]) -> list[float | None]:
    """Compound polarity in [-1, 1] per text; None stays None."""
    analyzer = _analyzer()
    return [None if t is None else float(analyzer.polarity_scores(t)["compound"]) for t in texts]


@scorer(
    "vader",
    SCORER_VERSION,
    sql_function="vader_compound",
    returns="DOUBLE",
    model="response_scores_vader",
    metric=Metric(
        "VADER compound",
        "higher_is_better",
        "VADER compound sentiment of the whole response (AccessEval 3.4, metric 1); higher is "
        "a more favourable tone.",
        scale_min=-1,
        scale_max=1,
    ),
)
def vader_compound_arrow(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The vectorised form DuckDB calls as ``vader_compound(text)``, on every available core."""
    return pa.array(map_batches(vader_compound, texts.to_pylist()), type=pa.float64())
