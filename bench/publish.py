"""Where a publish spends its time: each relation's copy into the published file, and the
Parquet files, for a built warehouse.

Why: after a build, ``ableaudit build`` writes the whole published copy and every mart's
Parquet file again; at a million generations that is most of a build after one more model.
This publishes a warehouse into a temporary folder (the warehouse itself is only read) and
prints the wall and CPU time of each relation's copy and its share of the whole publish, the
slowest first, with its kind and rows, then the Parquet files' share and the peak RSS.

    .venv/bin/python bench/publish.py                          # warehouse/ableaudit.duckdb
    .venv/bin/python bench/publish.py --warehouse /tmp/wh/rows-1000000/ableaudit.duckdb --top 20

(``bench/warehouse.py --keep DIR`` leaves such a warehouse in ``DIR/rows-N``.)
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def timed_publish(warehouse: Path, out: Path) -> dict:
    """Publish ``warehouse`` into ``out``, timing each relation's copy."""
    from ableaudit.warehouse import publish as publishing

    relations = []
    copy = publishing._copy_relation

    def timed(con, catalog, schema, name, kind, version):
        wall, cpu = time.perf_counter(), time.process_time()
        published = copy(con, catalog, schema, name, kind, version)
        relations.append(
            {
                "relation": f"{schema}.{name}",
                "kind": kind,
                "rows": published.n_rows,
                "wall_s": round(time.perf_counter() - wall, 2),
                "cpu_s": round(time.process_time() - cpu, 2),
            }
        )
        return published

    publishing._copy_relation = timed
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        target = publishing.publish(warehouse, out)
    finally:
        publishing._copy_relation = copy
    total_wall, total_cpu = time.perf_counter() - wall, time.process_time() - cpu
    copied = sum(r["wall_s"] for r in relations)
    return {
        "warehouse": str(warehouse),
        "wall_s": round(total_wall, 1),
        "cpu_s": round(total_cpu, 1),
        "copy_wall_s": round(copied, 1),
        "rest_wall_s": round(total_wall - copied, 1),  # Parquet files, manifest, attach
        "copy_mb": round(target.stat().st_size / 1e6),
        "max_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 2),
        "relations": sorted(relations, key=lambda r: -r["wall_s"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warehouse", type=Path, default=ROOT / "warehouse" / "ableaudit.duckdb")
    parser.add_argument("--top", type=int, default=15, help="relations to print")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    if not args.warehouse.is_file():
        parser.error(f"no warehouse at {args.warehouse}; build one first (`ableaudit build`)")
    out = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    try:
        result = timed_publish(args.warehouse.resolve(), out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(
        f"publish of {result['warehouse']}: {result['wall_s']} s wall, {result['cpu_s']} s CPU, "
        f"peak RSS {result['max_rss_gb']} GB, a copy of {result['copy_mb']:,} MB; copying "
        f"relations {result['copy_wall_s']} s "
        f"({result['copy_wall_s'] / result['wall_s']:.0%}), the rest (Parquet files, manifest) "
        f"{result['rest_wall_s']} s"
    )
    print(f"the {args.top} slowest relations:")
    for r in result["relations"][: args.top]:
        print(
            f"  {r['wall_s']:7.1f} s wall {r['cpu_s']:7.1f} s CPU "
            f"{r['wall_s'] / result['wall_s']:6.1%}  {r['relation']} "
            f"({r['kind']}, {r['rows'] if r['rows'] is not None else 'left out'} rows)"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
