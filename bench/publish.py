"""Where a publish spends its time: each relation's copy into the published file, and the
Parquet files, for a built warehouse; and a publish that updates the previous copy, side by side.

Why: a publish after a build of one more model used to write the whole published copy and
every mart's Parquet file again; at a million generations that was most of such a build.
This publishes a warehouse into a temporary folder (the warehouse itself is only read) and
prints the wall and CPU time of each relation's copy and its share of the whole publish, the
slowest first, with its kind and rows, then the Parquet files' share and the peak RSS.

Then, side by side with that fresh copy, the publish that updates a previous copy: that
previous copy is the fresh one less every row of one model (``--model``, by default the last
``model_id`` of ``raw.generations``) in every table with a ``model_id`` column, and less that
model's fingerprints in ``publish.relation_groups``, as if that model had just landed. It is
updated twice: model by model, as a publish does, and row by row, as it does when the copy
records no fingerprints (the baseline). It prints each publish's times, the ratios and what
each relation became (written, updated, unchanged).

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
    copy = publishing.copy_relation

    def timed(con, catalog, schema, name, kind, *rest):
        wall, cpu = time.perf_counter(), time.process_time()
        published = copy(con, catalog, schema, name, kind, *rest)
        relations.append(
            {
                "relation": f"{schema}.{name}",
                "kind": kind,
                "rows": published.n_rows,
                "change": published.change,
                "wall_s": round(time.perf_counter() - wall, 2),
                "cpu_s": round(time.process_time() - cpu, 2),
            }
        )
        return published

    publishing.copy_relation = timed
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        target = publishing.publish(warehouse, out)
    finally:
        publishing.copy_relation = copy
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


def without_one_model(copy: Path, model: str | None) -> str:
    """Delete one model's rows from every table of a published copy that has a ``model_id``
    column, and its recorded fingerprints; return the model's id."""
    import duckdb

    con = duckdb.connect(str(copy))
    try:
        if model is None:
            (model,) = con.execute("select max(model_id) from raw.generations").fetchone()
        tables = con.execute(
            "select distinct table_schema, table_name from information_schema.columns "
            "where column_name = 'model_id' and table_schema <> 'publish'"
        ).fetchall()
        for schema, name in tables:
            con.execute(f'delete from "{schema}"."{name}" where model_id = ?', [model])
        con.execute(
            "delete from publish.relation_groups where group_column = 'model_id' and group_value = ?",
            [model],
        )
        con.execute("checkpoint")
    finally:
        con.close()
    return model


def forget_groups(copy: Path) -> None:
    """Drop the fingerprints a published copy records of its models' rows."""
    import duckdb

    con = duckdb.connect(str(copy))
    try:
        con.execute("drop table if exists publish.relation_groups")
        con.execute("checkpoint")
    finally:
        con.close()


def print_publish(result: dict, top: int) -> None:
    print(
        f"publish of {result['warehouse']}: {result['wall_s']} s wall, {result['cpu_s']} s CPU, "
        f"peak RSS {result['max_rss_gb']} GB, a copy of {result['copy_mb']:,} MB; copying "
        f"relations {result['copy_wall_s']} s "
        f"({result['copy_wall_s'] / result['wall_s']:.0%}), the rest (Parquet files, manifest, "
        f"the previous copy's file) {result['rest_wall_s']} s"
    )
    print(f"the {top} slowest relations:")
    for r in result["relations"][:top]:
        print(
            f"  {r['wall_s']:7.1f} s wall {r['cpu_s']:7.1f} s CPU "
            f"{r['wall_s'] / result['wall_s']:6.1%}  {r['relation']} "
            f"({r['kind']}, {r['rows'] if r['rows'] is not None else 'left out'} rows, {r['change']})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warehouse", type=Path, default=ROOT / "warehouse" / "ableaudit.duckdb")
    parser.add_argument("--top", type=int, default=15, help="relations to print")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--model", help="the model whose rows the previous copy lacks")
    args = parser.parse_args(argv)
    if not args.warehouse.is_file():
        parser.error(f"no warehouse at {args.warehouse}; build one first (`ableaudit build`)")
    out = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    try:
        fresh = timed_publish(args.warehouse.resolve(), out / "fresh")
        previous = out / "update" / args.warehouse.name
        previous.parent.mkdir()
        shutil.copyfile(out / "fresh" / args.warehouse.name, previous)
        shutil.copytree(out / "fresh" / args.warehouse.stem, out / "update" / args.warehouse.stem)
        model = without_one_model(previous, args.model)
        shutil.copytree(out / "update", out / "rows")
        forget_groups(out / "rows" / args.warehouse.name)
        update = timed_publish(args.warehouse.resolve(), out / "update")
        by_rows = timed_publish(args.warehouse.resolve(), out / "rows")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("== a fresh copy")
    print_publish(fresh, args.top)
    print(f"\n== updating a previous copy that lacks the rows of {model}, model by model")
    print_publish(update, args.top)
    print("\n== the same update row by row (the copy records no fingerprints of models)")
    print_publish(by_rows, args.top)
    print()
    for label, result in (("model by model", update), ("row by row", by_rows)):
        changes: dict[str, int] = {}
        for r in result["relations"]:
            changes[str(r["change"])] = changes.get(str(r["change"]), 0) + 1
        print(
            f"update {label} / fresh: {result['wall_s'] / fresh['wall_s']:.1%} of the wall time, "
            f"{result['cpu_s'] / fresh['cpu_s']:.1%} of the CPU; relations: "
            + ", ".join(f"{n} {c}" for c, n in sorted(changes.items()))
        )
    print(
        f"model by model / row by row: {update['wall_s'] / by_rows['wall_s']:.2f}x the wall time, "
        f"{update['cpu_s'] / by_rows['cpu_s']:.2f}x the CPU"
    )
    if args.json:
        result = {
            "fresh": fresh,
            "update": {**update, "model": model},
            "update_row_by_row": {**by_rows, "model": model},
        }
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
