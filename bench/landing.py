"""Rows per second and peak memory of `import responses` for a Parquet file, against two
baselines in the same run.

Builds a synthetic Parquet file of N responses (texts drawn from a pool of distinct
~250-word answers, as an audit's are), and a warehouse holding 2,340 prompts, then times,
each in a child process of its own (its peak RSS read from the kernel when it ends):

- ours: ``import_responses`` of this tree (Arrow record batches), then the same file again
  (nothing new to land);
- the floor: a bare DuckDB ``insert into scratch select * from read_parquet(...)`` of the
  same rows into a scratch table of a fresh file;
- the previous implementation, taken from a git revision (``git archive REV ableaudit``),
  into a warehouse that revision's code made, run on the first ``--baseline-rows`` rows of
  the same file, with this tree run again on the same rows.

    .venv/bin/python bench/landing.py                       # 100k rows
    .venv/bin/python bench/landing.py --rows 1000000 --baseline-rows 20000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BASELINE_REV = "9587e67"
"""The commit before the import went through Arrow."""

from _synthetic import WORDS as _WORDS  # noqa: E402 (bench/ is the script's folder)
from _synthetic import in_fresh_process  # noqa: E402

DISABILITIES = [
    "hearing",
    "vision",
    "mobility",
    "cognitive",
    "speech",
    "chronic",
    "mental",
    "other",
]
QUERIES = 260
"""Neutral queries: with one variant per disability, 2,340 prompts."""

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ableaudit.ingest.responses import import_responses
start = time.perf_counter()
report = import_responses(sys.argv[2], sys.argv[3])
elapsed = time.perf_counter() - start
print(json.dumps({"s": elapsed, "inserted": report.inserted, "unchanged": report.unchanged}))
"""

FLOOR = r"""
import duckdb, json, sys, time
con = duckdb.connect(sys.argv[1])
start = time.perf_counter()
con.execute("create table scratch as select * from read_parquet(?) limit 0", [sys.argv[2]])
con.execute("insert into scratch select * from read_parquet(?)", [sys.argv[2]])
con.close()
print(json.dumps({"s": time.perf_counter() - start}))
"""


def build_file(path: Path, rows: int, pool: int, words: int, seed: int) -> None:
    """N responses: models x prompts x samples, unique keys, texts from a pool."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    texts = [" ".join(rng.choices(_WORDS, k=words)) + f" ({i})" for i in range(pool)]
    per_model = QUERIES * (1 + len(DISABILITIES)) * 3  # 3 samples
    model, query, disability, sample, text = [], [], [], [], []
    variants = [""] + DISABILITIES
    for i in range(rows):
        m, rest = divmod(i, per_model)
        s, rest = divmod(rest, QUERIES * len(variants))
        q, d = divmod(rest, len(variants))
        model.append(f"model-{m:03d}")
        query.append(f"q_{q:03d}")
        disability.append(variants[d])
        sample.append(s)
        text.append(texts[rng.randrange(pool)])
    table = pa.table(
        {
            "model_id": model,
            "query_id": query,
            "disability": disability,
            "response_text": text,
            "sample_index": pa.array(sample, pa.int32()),
            "temperature": pa.array([0.7] * rows),
        }
    )
    pq.write_table(table, path)


def build_warehouse(path: Path, root: Path) -> None:
    """A warehouse holding the prompts and disabilities an import reads (as dbt builds them)."""
    sys.path.insert(0, str(root))
    from ableaudit.warehouse import connect

    con = connect(path)
    try:
        con.execute(
            "create table main.stg_seeds__disabilities as select d as disability_id, "
            "d as display_name, null::varchar as short_name from unnest(?::varchar[]) t(d)",
            [DISABILITIES],
        )
        con.execute(
            "create table main.int_prompts as select "
            "'ableaudit:' || q || ':' || coalesce(d, 'neutral') as prompt_id, "
            "'ableaudit' as query_set, q as query_id, d as disability_id, "
            "'education' as domain, 'Question ' || q || coalesce(' for ' || d, '') as prompt_text "
            "from (select 'q_' || lpad(i::varchar, 3, '0') as q from range(?) t(i)) "
            "cross join (select unnest(?::varchar[]) as d union all select null)",
            [QUERIES, DISABILITIES],
        )
    finally:
        con.close()


def run_child(argv: list[str], env: dict[str, str] | None = None, may_fail: bool = False) -> dict:
    """Run a child Python; its printed JSON, its wall time and its peak RSS (MB). A child
    that fails ends the run, unless ``may_fail``: then its result is ``{"failed": <the
    last line it printed>}``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode and may_fail:
        lines = err.decode().strip().splitlines() or ["?"]
        return {"failed": next((x for x in reversed(lines) if "Error" in x), lines[-1])}
    if proc.returncode:
        raise SystemExit(f"child failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - start
    result["rss_mb"] = usage.ru_maxrss / 1024
    return result


def head(src: Path, dst: Path, rows: int) -> None:
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(src).slice(0, rows), dst)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the Parquet file")
    parser.add_argument(
        "--baseline-rows",
        type=int,
        default=20_000,
        help="rows given to the previous implementation (and to ours again, to compare)",
    )
    parser.add_argument("--baseline-rev", default=BASELINE_REV, help="git revision of it")
    parser.add_argument("--pool", type=int, default=20_000, help="distinct answer texts")
    parser.add_argument("--words", type=int, default=250, help="words per answer")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep the files")
    args = parser.parse_args()

    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-landing-"))
    work.mkdir(parents=True, exist_ok=True)
    for stale in work.glob("*.duckdb*"):  # a kept folder's warehouses of an earlier run
        stale.unlink()
    try:
        data = work / "responses.parquet"
        # built in a process of its own: this one stays small (see in_fresh_process)
        in_fresh_process(
            build_file, data, args.rows, min(args.pool, args.rows), args.words, args.seed
        )
        template = work / "template.duckdb"
        build_warehouse(template, ROOT)
        size_mb = data.stat().st_size / 2**20
        print(f"{args.rows:,} rows, {size_mb:.1f} MB of Parquet, texts of ~{args.words} words")

        def fresh(name: str, like: Path = template) -> Path:
            wh = work / f"{name}.duckdb"
            shutil.copy(like, wh)
            return wh

        wh = fresh("ours")
        ours = run_child(["-c", CHILD, str(ROOT), str(data), str(wh)])
        again = run_child(["-c", CHILD, str(ROOT), str(data), str(wh)])
        floor = run_child(["-c", FLOOR, str(work / "floor.duckdb"), str(data)])
        assert ours["inserted"] == args.rows and again["unchanged"] == args.rows, (ours, again)

        n = min(args.baseline_rows, args.rows)
        small = work / "small.parquet"
        in_fresh_process(head, data, small, n)
        old_tree = work / "previous"
        old_tree.mkdir(exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline_rev, "ableaudit"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": str(old_tree)}
        # its warehouse made by its own code: the raw tables as that revision declared them
        old_template = work / "template_previous.duckdb"
        in_fresh_process(build_warehouse, old_template, old_tree)
        previous = run_child(
            ["-c", CHILD, str(old_tree), str(small), str(fresh("prev", old_template))],
            env,
            may_fail=True,
        )
        ours_small = run_child(["-c", CHILD, str(ROOT), str(small), str(fresh("ours_small"))])

        def rate(rows: int, r: dict, name: str | None = None) -> str:
            if "failed" in r:
                return f"failed: {r['failed'][:90]}"
            size = (
                f"  file {(work / f'{name}.duckdb').stat().st_size / 2**20:6.0f} MB" if name else ""
            )
            return (
                f"{rows / r['s']:>10,.0f} rows/s  {r['s']:7.2f} s  peak RSS {r['rss_mb']:6.0f} MB"
                + size
            )

        print(f"\n{args.rows:,} rows")
        print(f"  floor (bare insert)      {rate(args.rows, floor, 'floor')}")
        print(f"  ours                     {rate(args.rows, ours)}")
        print(f"  ours, again (0 new)      {rate(args.rows, again, 'ours')}")
        print(f"\n{n:,} rows")
        print(f"  previous ({args.baseline_rev})      {rate(n, previous, 'prev')}")
        print(f"  ours                     {rate(n, ours_small, 'ours_small')}")
        print("\nratios")
        print(f"  ours / floor, time            {ours['s'] / floor['s']:6.2f}x")
        if "failed" in previous:
            return 0
        print(f"  previous / ours, time ({n:,}) {previous['s'] / ours_small['s']:6.2f}x")
        print(f"  previous / ours, peak RSS      {previous['rss_mb'] / ours_small['rss_mb']:6.2f}x")
        print(
            f"  per row: ours {ours['rss_mb'] * 2**20 / args.rows / 1024:.2f} KB of peak RSS, "
            f"previous {previous['rss_mb'] * 2**20 / n / 1024:.2f} KB"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
