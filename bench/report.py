"""Rendering time and size of the HTML report: one model against many, side by side as ratios.

Why: the report is rendered after every build, and its pages must stay small
enough to open from disk. This takes one model's rows of a built warehouse and
makes synthetic warehouses of 1 and N models from them: every table and raw row
of the model is copied under new model ids (the views of the copy, int_pairs
and the rest, pair the copies as they pair the original). It then renders each
report and prints the time and the bytes written.

    .venv/bin/python bench/report.py                                  # warehouse/published/ableaudit.duckdb
    .venv/bin/python bench/report.py --source /tmp/w/published/ableaudit.duckdb --models 1 50
    .venv/bin/python bench/report.py --build                           # builds a small one-model world first (~2 min)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _tables_with_models(con) -> list[tuple[str, str]]:
    return [
        (s, t)
        for s, t in con.execute(
            "select c.table_schema, c.table_name from information_schema.columns c "
            "join duckdb_tables() d on d.schema_name = c.table_schema and d.table_name = c.table_name "
            "where c.column_name = 'model_id' and d.database_name = current_database() order by 1, 2"
        ).fetchall()
    ]


def synthetic(source: Path, model: str, n_models: int, out: Path) -> Path:
    """A copy of ``source`` holding ``model`` only, copied ``n_models`` times under new model ids."""
    import duckdb

    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, out)
    con = duckdb.connect(str(out))
    try:
        for schema, table in _tables_with_models(con):
            name = f'"{schema}"."{table}"'
            cols = [
                c
                for (c,) in con.execute(
                    "select column_name from information_schema.columns where table_schema = ? and table_name = ? "
                    "order by ordinal_position",
                    [schema, table],
                ).fetchall()
            ]
            con.execute(
                f"create temp table one as select * from {name} where model_id = ?", [model]
            )
            con.execute(f"delete from {name}")
            for i in range(n_models):
                suffix = f"-{i:02d}" if n_models > 1 else ""
                exprs = []
                for c in cols:
                    if c == "model_id":
                        exprs.append(f"model_id || '{suffix}' as model_id")
                    elif c.endswith("generation_id") or c in ("pair_id", "target"):
                        exprs.append(
                            f'case when "{c}" is null then null else "{c}" || \'{suffix}\' end as "{c}"'
                        )
                    else:
                        exprs.append(f'"{c}"')
                con.execute(f"insert into {name} select {', '.join(exprs)} from one")
            con.execute("drop table one")
    finally:
        con.close()
    return out


def bytes_under(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source", type=Path, default=ROOT / "warehouse" / "published" / "ableaudit.duckdb"
    )
    parser.add_argument(
        "--build", action="store_true", help="build a small one-model world to take the rows from"
    )
    parser.add_argument(
        "--model", help="the model whose rows are copied (default: the first text model)"
    )
    parser.add_argument("--models", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--max-pairs", type=int, default=300)
    args = parser.parse_args(argv)

    import duckdb

    from ableaudit.report import render_report

    tmp = Path(tempfile.mkdtemp(prefix="bench-report-"))
    source = args.source
    if args.build:
        from tests.fixtures.report_world import build_world, dbt_environment

        with dbt_environment(tmp):
            source = build_world(tmp / "world", rich=False)
    if not source.is_file():
        parser.error(
            f"no warehouse at {source}: run `ableaudit build`, pass --source, or use --build"
        )
    con = duckdb.connect(str(source), read_only=True)
    try:
        model = (
            args.model
            or con.execute(
                "select model_id from degradation where task = 'text' order by model_id limit 1"
            ).fetchall()[0][0]
        )
    finally:
        con.close()
    print(
        f"rows of {model} from {source}; max {args.max_pairs} pairs per arm on a drill-down page\n"
    )
    results = []
    try:
        for n in args.models:
            wh = synthetic(source, model, n, tmp / f"m{n}" / "ableaudit.duckdb")
            start = time.perf_counter()
            report = render_report(wh, tmp / f"m{n}" / "report", max_pairs=args.max_pairs)
            seconds = time.perf_counter() - start
            index = report.index.stat().st_size
            results.append((n, seconds, bytes_under(report.index.parent), index, len(report.pages)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = results[0]
    print(
        f"{'models':>6}  {'render s':>9}  {'ratio':>6}  {'all pages MB':>12}  {'ratio':>6}  {'index MB':>9}  "
        f"{'ratio':>6}  {'pages':>5}  {'s per model':>11}"
    )
    for n, s, size, index, pages in results:
        print(
            f"{n:>6}  {s:>9.2f}  {s / base[1]:>5.1f}x  {size / 1e6:>12.2f}  {size / base[2]:>5.1f}x  "
            f"{index / 1e6:>9.2f}  {index / base[3]:>5.1f}x  {pages:>5}  {s / n:>11.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
