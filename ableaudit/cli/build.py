"""`ableaudit build`, `publish` and `report`, for ``ableaudit/cli/main.py`` to wire: the
warehouse's derived tables, its published copy and the HTML report.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ableaudit.warehouse import existing_warehouse


def cmd_build(args: argparse.Namespace) -> int:
    from ableaudit.build import build_and_publish

    wh = existing_warehouse(args.warehouse)
    if not getattr(args, "verbose", False):
        print(f"Building {wh} (dbt's log: logs/dbt.log; -v prints it) ...", flush=True)
    build_and_publish(
        wh,
        args.vars,
        args.storage_version,
        args.all_tests,
        force=args.force,
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ableaudit.report import render_report

    report = render_report(args.warehouse, args.out, max_pairs=args.max_pairs)
    print(
        f"Read {report.source} (read-only)\nWrote {len(report.pages)} pages; open {report.index} in a browser"
    )
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from ableaudit.warehouse.publish import publish

    print(publish(existing_warehouse(args.warehouse), storage_version=args.storage_version))
    return 0


def add_build_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`ableaudit build`, `ableaudit publish` and `ableaudit report`."""
    storage = argparse.ArgumentParser(add_help=False)
    storage.add_argument(
        "--storage-version",
        help="DuckDB storage format of the published copy, e.g. v1.4.0 "
        "(default: $ABLEAUDIT_PUBLISH_STORAGE_VERSION, else v1.1.0, which DuckDB 1.1 and newer read)",
    )

    p = sub.add_parser(
        "build",
        parents=[common, storage],
        help="dbt build (seeds included), then publish a copy for BI",
    )
    p.add_argument("--vars", help="dbt vars as YAML, e.g. '{degradation_threshold: 0.1}'")
    p.add_argument(
        "--all-tests",
        action="store_true",
        help="run every data test, also those the default build leaves out because they scan "
        "every generation or pair (dbt: --selector all_tests; see docs/testing.md)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="build even when nothing it reads changed since the last build "
        "(docs/incremental.md: skipped builds)",
    )
    p.set_defaults(func=cmd_build)

    p = sub.add_parser(
        "publish", parents=[common, storage], help="publish a read-only copy and Parquet marts"
    )
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser(
        "report",
        parents=[common],
        help="render the HTML report from the published copy (read-only; no model, no live warehouse)",
    )
    p.add_argument(
        "--out", type=Path, help="folder to write (default: report/ beside the published copy)"
    )
    p.add_argument(
        "--max-pairs", type=int, default=300, help="pairs per model and arm on the drill-down pages"
    )
    p.set_defaults(func=cmd_report)
