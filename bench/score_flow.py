"""Texts per second of VADER scored inside `dbt build` against the scoring flow (`ableaudit score`).

Why: a warehouse too big to score inside one dbt process scores outside it, as a
Prefect map over text batches that lands raw.text_scores; the build then takes the
landed scores. This builds one warehouse of N distinct synthetic answers (~250 words,
bench/scorers.py's generator), then on a fresh copy of it each time:

- in dbt: `dbt run --select response_scores_vader`, the UDF on a pool of 1 and of W processes;
- the flow: `score(scorers=['vader'])` on the thread runner with 1 and W workers, then the
  same `dbt run`, which now takes the landed scores (its time is printed apart);

and prints texts/s and the ratio of each against dbt with one process, in the same run.
Every way must give the same response_scores_vader, row for row (exact floats).

    .venv/bin/python bench/score_flow.py                 # 8,192 texts, W = 2
    .venv/bin/python bench/score_flow.py --texts 20000 --workers 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")


def base_warehouse(path: Path, n: int, words: int) -> None:
    """N generations, each with its own text, and the staging view the score model reads."""
    import pyarrow as pa

    from ableaudit.dbt.runner import run_dbt
    from ableaudit.warehouse import connect
    from bench.scorers import synthetic_texts

    texts = synthetic_texts(n, words, seed=11)
    rows = pa.table(
        {
            "generation_id": [f"g{i:07d}" for i in range(n)],
            "task": ["text"] * n,
            "target": ["bench"] * n,
            "model_id": ["bench"] * n,
            "backend": ["import"] * n,
            "arm": ["baseline"] * n,
            "query_set": ["ableaudit"] * n,
            "query_id": [f"q{i}" for i in range(n)],
            "condition": ["neutral"] * n,
            "prompt_id": [f"ableaudit:q{i}:neutral" for i in range(n)],
            "prompt_text": ["p"] * n,
            "sample_index": [0] * n,
            "status": ["ok"] * n,
            "response_text": texts,
            "source": ["imported"] * n,
        }
    )
    con = connect(path)
    con.register("rows", rows)
    con.execute("insert into raw.generations by name select * from rows")
    con.close()
    run_dbt(["run", "--select", "stg_raw__generations"], path)


def dbt_scores(wh: Path, pool: int) -> float:
    """Seconds of `dbt run --select response_scores_vader` with a UDF pool of ``pool`` processes."""
    from ableaudit.dbt.runner import run_dbt
    from ableaudit.scorers import parallel

    os.environ[parallel.WORKERS_ENV] = str(pool)
    start = time.perf_counter()
    run_dbt(["run", "--select", "response_scores_vader"], wh)
    return time.perf_counter() - start


def flow_scores(wh: Path, workers: int, batch_size: int) -> float:
    from ableaudit.scoring.flow import score

    start = time.perf_counter()
    summary = score(warehouse=str(wh), scorers=["vader"], batch_size=batch_size, workers=workers)
    assert summary["landed"] == summary["pending"]["vader"], summary
    return time.perf_counter() - start


def vader_rows(wh: Path) -> list[tuple]:
    import duckdb

    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(
            "select text_hash, scorer_version, vader_compound, status "
            "from response_scores_vader order by text_hash"
        ).fetchall()
    finally:
        con.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=8192, help="distinct texts to score")
    parser.add_argument("--words", type=int, default=250, help="words per synthetic text")
    parser.add_argument("--workers", type=int, default=2, help="W: workers of the wider runs")
    parser.add_argument("--batch-size", type=int, default=2048, help="texts per flow task")
    args = parser.parse_args()

    from ableaudit.audit import prefect_env

    prefect_env.configure()
    from ableaudit.audit.prefect_server import temporary_server
    from ableaudit.scorers import parallel

    scratch = Path(tempfile.mkdtemp(prefix="ableaudit-bench-score-"))
    base, wh = scratch / "base.duckdb", scratch / "work.duckdb"  # one path: dbt parses once
    os.environ["DBT_TARGET_PATH"] = str(scratch / "target")
    os.environ["DBT_LOG_PATH"] = str(scratch / "logs")
    base_warehouse(wh, args.texts, args.words)  # dbt parses the project for this path once
    shutil.copy(wh, base)

    def fresh() -> Path:
        shutil.copy(base, wh)
        return wh

    rows, results = {}, []
    w = args.workers
    for pool in (1, w):
        seconds = dbt_scores(fresh(), pool)
        results.append((f"in dbt, UDF pool of {pool}", seconds, None))
        rows[f"dbt{pool}"] = vader_rows(wh)
    with temporary_server():
        for workers in (1, w):
            flow_s = flow_scores(fresh(), workers, args.batch_size)
            take_s = dbt_scores(wh, 1)
            results.append((f"flow, thread runner, {workers} workers", flow_s, take_s))
            rows[f"flow{workers}"] = vader_rows(wh)
    parallel.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)

    n = args.texts
    baseline = results[0][1]
    print(f"{n} distinct texts of {args.words} words; {parallel.available_cores()} cores available")
    print(f"{'way':<36}{'scoring s':>10}{'texts/s':>9}{'vs dbt/1':>10}{'+ build takes s':>17}")
    for name, seconds, take in results:
        print(
            f"{name:<36}{seconds:>10.1f}{n / seconds:>9.0f}{baseline / seconds:>9.2f}x"
            + (f"{take:>17.1f}" if take is not None else f"{'':>17}")
        )
    same = all(r == rows["dbt1"] for r in rows.values()) and len(rows["dbt1"]) == n
    print(f"response_scores_vader identical row for row in every way: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
