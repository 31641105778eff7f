"""The build's statistics, data tests and dbt parse: what is recomputed, tested and parsed again.

Builds a synthetic warehouse of imported responses (MODELS x 234 queries x 10 conditions,
texts drawn from a small pool), then prints, each figure beside its baseline in the same run:

- `significance` seconds: a full recompute (var stats_reuse false) against the build after one
  more model is landed (rows of unchanged groups reused), and whether both tables are equal;
- data-test seconds: the default selection against the whole suite (`--selector all_tests`);
- checks after a landing on the last build's project (`--selector landed_rows_build`: no unit
  tests, no data tests that read no landed row) against the default selection;
- `dbt parse` seconds after switching to another warehouse file, against a parse that cannot
  reuse the previous one (`--no-partial-parse`, what a warehouse switch cost while the profile
  read the path).

    .venv/bin/python bench/build_overhead.py --models 4 --texts 2000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ableaudit import PROJECT_ROOT  # noqa: E402 (after sys.path)
from ableaudit.cli import main as cli  # noqa: E402
from ableaudit.dbt.runner import LANDED_ROWS_SELECTOR, run_dbt  # noqa: E402

WORDS = (
    "you can plan the steps ahead with a list of options and ask for details great sorry".split()
)


def _queries() -> list[str]:
    lines = (PROJECT_ROOT / "seeds" / "queries.csv").read_text().splitlines()[1:]
    return [line.split(",", 1)[0] for line in lines]


def _disabilities() -> list[str]:
    lines = (PROJECT_ROOT / "seeds" / "disabilities.csv").read_text().splitlines()[1:]
    return [line.split(",", 1)[0] for line in lines]


def responses(path: Path, models: list[str], pool: list[str], seed: int) -> int:
    rng = random.Random(seed)
    rows: dict[str, list] = {"model_id": [], "query_id": [], "disability": [], "response_text": []}
    for model in models:
        for query in _queries():
            for disability in [None, *_disabilities()]:
                rows["model_id"].append(model)
                rows["query_id"].append(query)
                rows["disability"].append(disability)
                rows["response_text"].append(rng.choice(pool))
    pq.write_table(pa.table(rows), path)
    return len(rows["model_id"])


def _timings(project: Path) -> list[dict]:
    results = json.loads((project / "target" / "run_results.json").read_text())["results"]
    return [{"id": r["unique_id"], "s": r["execution_time"]} for r in results]


def _build(wh: Path, args: list[str], keep: str) -> tuple[float, list[dict]]:
    start = time.perf_counter()
    run_dbt(["build", *args], wh)
    seconds = time.perf_counter() - start
    shutil.copy(PROJECT_ROOT / "target" / "run_results.json", wh.parent / f"{keep}.json")
    return seconds, _timings(PROJECT_ROOT)


def _node(timings: list[dict], name: str) -> float:
    return sum(t["s"] for t in timings if t["id"] == f"model.ableaudit.{name}")


def _tests(timings: list[dict], kinds: tuple[str, ...] = ("test.",)) -> tuple[int, float]:
    tests = [t["s"] for t in timings if t["id"].startswith(kinds)]
    return len(tests), sum(tests)


def _table(wh: Path, name: str, order: str):
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.sql(f"select * exclude (inputs_fingerprint) from {name} order by {order}").df()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=4, help="models landed before the one added")
    parser.add_argument("--texts", type=int, default=2000, help="distinct response texts")
    parser.add_argument("--workdir", type=Path, help="keep the warehouses here")
    parser.add_argument("--parse-only", action="store_true", help="only the dbt parse figures")
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="ableaudit-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    pool = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60))) for _ in range(args.texts)
    ]
    wh = work / "bench.duckdb"
    if args.parse_only:
        _parse(wh, work)
        return 0
    first = work / "first.parquet"
    n = responses(first, [f"model-{i:02d}" for i in range(args.models)], pool, 1)
    assert cli(["import", "responses", str(first), "--warehouse", str(wh)]) == 0
    full_s, full = _build(wh, [], "first")
    print(f"landed {n} generations; first build {full_s:.1f} s")

    one_more = work / "one_more.parquet"
    n_more = responses(one_more, [f"model-{args.models:02d}"], pool, 2)
    assert cli(["import", "responses", str(one_more), "--warehouse", str(wh)]) == 0
    _, incremental = _build(wh, [], "one_more")
    order = "task, model_id, arm, query_set, metric, slice, slice_value"
    reused = _table(wh, "significance", order)
    _, recomputed = _build(
        wh, ["--select", "significance", "--vars", "{stats_reuse: false}"], "recompute"
    )
    again = _table(wh, "significance", order)
    same = reused.equals(again)
    s_full, s_inc = _node(recomputed, "significance"), _node(incremental, "significance")
    print(
        f"significance after one more model ({n_more} generations): {s_inc:.2f} s, "
        f"full recompute {s_full:.2f} s: {s_inc / s_full:.2f}x; tables equal: {same}"
    )

    _, noop = _build(wh, [], "default_tests")
    s_noop = _node(noop, "significance")
    print(f"significance on a rebuild with nothing new: {s_noop:.2f} s: {s_noop / s_full:.2f}x")
    n_default, t_default = _tests(noop)
    n_all, t_all = _tests(_build(wh, ["--selector", "all_tests"], "all_tests")[1])
    print(
        f"data tests, default selection: {n_default} tests {t_default:.1f} s; "
        f"all: {n_all} tests {t_all:.1f} s: {t_default / t_all:.2f}x"
    )

    checks = ("test.", "unit_test.")
    n_checks, t_checks = _tests(noop, checks)
    n_landed, t_landed = _tests(
        _build(wh, ["--selector", LANDED_ROWS_SELECTOR], "landed")[1], checks
    )
    print(
        f"data and unit tests, default selection: {n_checks} tests {t_checks:.1f} s; on the last "
        f"build's project (landed_rows_build): {n_landed} tests {t_landed:.1f} s: "
        f"{t_landed / t_checks:.2f}x"
    )

    _parse(wh, work)
    print(f"warehouses in {work}")
    return 0 if same else 1


def _parse(wh: Path, work: Path) -> None:
    other = work / "other" / wh.name  # the same name in another folder
    run_dbt(["parse"], wh)
    start = time.perf_counter()
    run_dbt(["parse"], other)
    switched = time.perf_counter() - start
    start = time.perf_counter()
    run_dbt(["parse", "--no-partial-parse"], wh)
    reparsed = time.perf_counter() - start
    print(
        f"dbt parse after a switch to {other}: {switched:.1f} s; a full parse (what any switch "
        f"cost while the profile held the folder): {reparsed:.1f} s: {switched / reparsed:.2f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
