"""Texts per second of the per-text scorers: in one process against a pool of worker processes.

Why: DuckDB calls a Python scorer one vector (2,048 texts) at a time under the
GIL, so VADER used one core whatever the machine had. The pool
(``ableaudit.scorers.parallel``) splits each vector over the available cores.
This prints, for the same synthetic answers (~250 words, as long as a typical
chat answer), both rates side by side and the ratio, first calling the scorer
directly, then through DuckDB as a build does (``select vader_compound(text)``),
and checks that every compound is bit-identical to vaderSentiment's own.

    .venv/bin/python bench/scorers.py                 # 8,192 texts, workers = available cores
    .venv/bin/python bench/scorers.py --texts 20000 --workers 2
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_WORDS = (
    "you can compare the fees of several banks and ask for accessible statements plan your budget "
    "ahead with a list of options many people find it helpful to talk with an advisor about savings "
    "goals screen readers captions and large print are available on request some services offer "
    "support unfortunately this may be difficult and frustrating but great resources exist sadly "
    "not every office is welcoming happy to help wonderful terrible worried hopeful no never"
).split()


def synthetic_texts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=words)) + "!" * (i % 3) for i in range(n)]


def _time(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> int:
    from ableaudit.scorers import parallel, vader

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=8192, help="how many texts to score")
    parser.add_argument("--words", type=int, default=250, help="words per synthetic text")
    parser.add_argument(
        "--workers", type=int, default=None, help="pool size (default: the available cores)"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic texts")
    args = parser.parse_args()
    workers = args.workers or parallel.available_cores()
    texts = synthetic_texts(args.texts, args.words, args.seed)

    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    reference = SentimentIntensityAnalyzer()
    expected = [reference.polarity_scores(t)["compound"] for t in texts]

    # Start the pool before timing: a build pays the spawn once, not per vector.
    parallel.map_batches(vader.vader_compound, texts[: parallel.MIN_PARALLEL_TEXTS], workers)
    serial_s, serial = _time(lambda: vader.vader_compound(texts))
    pool_s, pooled = _time(lambda: parallel.map_batches(vader.vader_compound, texts, workers))

    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    con.register("texts", pa.table({"t": texts}))
    con.create_function(
        "vader_serial",
        lambda a: pa.array(vader.vader_compound(a.to_pylist()), pa.float64()),
        ["VARCHAR"],
        "DOUBLE",
        type="arrow",
    )
    con.create_function(
        "vader_pool",
        lambda a: pa.array(
            parallel.map_batches(vader.vader_compound, a.to_pylist(), workers), pa.float64()
        ),
        ["VARCHAR"],
        "DOUBLE",
        type="arrow",
    )
    sql_serial_s, sql_serial = _time(
        lambda: con.sql("select vader_serial(t) from texts").fetchall()
    )
    sql_pool_s, sql_pool = _time(lambda: con.sql("select vader_pool(t) from texts").fetchall())

    identical = (
        serial == expected
        and pooled == expected
        and sorted(r[0] for r in sql_serial) == sorted(expected)
        and sorted(r[0] for r in sql_pool) == sorted(expected)
    )
    n = len(texts)
    print(
        f"{n} texts of {args.words} words; pool of {workers} worker processes "
        f"({parallel.available_cores()} cores available)"
    )
    print(f"{'path':<28}{'one process':>14}{'pool':>14}{'ratio':>9}")
    print(
        f"{'vader_compound (direct)':<28}{n / serial_s:>10.0f} t/s{n / pool_s:>10.0f} t/s"
        f"{serial_s / pool_s:>8.2f}x"
    )
    print(
        f"{'vader_compound (in DuckDB)':<28}{n / sql_serial_s:>10.0f} t/s{n / sql_pool_s:>10.0f} t/s"
        f"{sql_serial_s / sql_pool_s:>8.2f}x"
    )
    print(f"compounds bit-identical to vaderSentiment: {identical}")
    parallel.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
