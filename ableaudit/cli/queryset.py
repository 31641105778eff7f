"""``ableaudit queryset ...``, for ``ableaudit/cli/main.py`` to wire: build a query set the
way AccessEval built its own, review it, and check existing sets (docs/querysets.md)."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from ableaudit.warehouse import existing_warehouse, warehouse_path


def cmd_build(args: argparse.Namespace) -> int:
    from ableaudit.queryset.config import load_build_config
    from ableaudit.queryset.flow import build_queryset

    load_build_config(args.config)  # a bad config fails here, before Prefect starts
    result = build_queryset(
        config=str(args.config),
        warehouse=str(warehouse_path(args.warehouse)),
        build=not args.no_build,
    )
    print(json.dumps(result, indent=2))
    qs = result["query_set"]
    if result["published"]:
        print(f"Published {qs}: audit it with `query_set: {qs}` in an audit config.")
    else:
        print(
            f"Built {qs}; review it: `ableaudit queryset export-review {qs}`, fill in `decision`, "
            "then `ableaudit queryset import-review FILE` publishes it."
        )
    errors = sum(s.get("errors", 0) for s in result["stages"].values())
    if errors:
        print(
            f"{errors} generator call(s) failed; run the same command again to ask only for those."
        )
    return 0


def cmd_export_review(args: argparse.Namespace) -> int:
    from ableaudit.queryset.review import export_review

    path, n = export_review(existing_warehouse(args.warehouse), args.name, args.out)
    print(f"Wrote {n} queries to review to {path}; fill in `decision` (accept, reject or edit).")
    return 0


def cmd_import_review(args: argparse.Namespace) -> int:
    from ableaudit.queryset.review import import_review

    query_set, decisions, n = import_review(warehouse_path(args.warehouse), args.file)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(decisions.items()))
    print(f"Landed the review of {query_set} ({counts}); published {n} prompts.")
    print(f"Audit it with `query_set: {query_set}`; `ableaudit build` refreshes queryset_funnel.")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ableaudit.queryset.check import check_query_set
    from ableaudit.queryset.config import Validation

    report = check_query_set(
        args.source,
        warehouse_path(args.warehouse),
        Validation()
        if args.query_similarity is None
        else Validation(query_similarity=args.query_similarity),
    )
    print(report.summary())
    if args.out is not None:
        with open(args.out, "w", newline="", encoding="utf-8") as f:
            cols = ["candidate_id", "domain", "neutral_query", "decision", "reason", "detail"]
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(report.items)
        print(f"Wrote every query's decision to {args.out}.")
    return 0


def add_queryset_parser(sub, common: argparse.ArgumentParser) -> None:
    group = sub.add_parser(
        "queryset",
        help="build a query set for your own domains (personas -> queries -> validation -> review)",
    ).add_subparsers(dest="what", required=True)

    p = group.add_parser(
        "build",
        parents=[common],
        help="generate and validate a query set from a config; resumable",
        description="Run the build-queryset flow: personas per domain, persona validation, a "
        "neutral query and a disability-aware template per persona, query validation; every "
        "stage lands in the warehouse. Run again to resume: nothing landed is generated twice.",
    )
    p.add_argument("--config", type=Path, required=True, help="the query-set config (YAML)")
    p.add_argument(
        "--no-build", action="store_true", help="land only; do not build the query-set marts"
    )
    p.set_defaults(func=cmd_build)

    p = group.add_parser(
        "export-review", parents=[common], help="write a built set's review sheet (CSV)"
    )
    p.add_argument("name", help="NAME@VERSION, or NAME for its latest build")
    p.add_argument(
        "--out", type=Path, help="the sheet to write (default: NAME-vVERSION-review.csv)"
    )
    p.set_defaults(func=cmd_export_review)

    p = group.add_parser(
        "import-review",
        parents=[common],
        help="land a filled review sheet (all or nothing) and publish the set",
    )
    p.add_argument("file", type=Path, help="the review sheet")
    p.set_defaults(func=cmd_import_review)

    p = group.add_parser(
        "check",
        parents=[common],
        help="run the build's query validation over an existing set; report what it would remove",
    )
    p.add_argument(
        "source",
        nargs="?",
        default="ableaudit",
        help="'ableaudit' (the built-in set), an AccessEval-layout CSV, or a landed set's name",
    )
    p.add_argument(
        "--query-similarity",
        type=float,
        help="cosine similarity at which two neutral queries are near-duplicates (default: "
        "the build's, 0.85)",
    )
    p.add_argument("--out", type=Path, help="also write every query's decision to this CSV")
    p.set_defaults(func=cmd_check)
