"""`ableaudit export ...`, for ``ableaudit/cli/main.py`` to wire: files for people (a sample
for annotators, preference pairs for DPO).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ableaudit.warehouse import existing_warehouse


def cmd_export_annotation_sample(args: argparse.Namespace) -> int:
    from ableaudit.ingest.annotations import export_annotation_sample
    from ableaudit.judges.dimensions import load_dimension_set

    dims = load_dimension_set(args.dimensions) if args.dimensions else None
    sample = export_annotation_sample(
        existing_warehouse(args.warehouse),
        args.out_dir,
        size_per_domain=args.size_per_domain,
        seed=args.seed,
        kind=args.kind,
        query_set=args.query_set,
        model_ids=args.model or None,
        dimensions=dims,
    )
    print(
        f"Wrote {sample.n_items} items to {sample.items_path}\nInstructions: {sample.instructions_path}"
    )
    short = [s for s in sample.shortfall if s.get("shortfall")]
    for s in short:
        print(
            f"  domain {s['domain']}: {s['sampled']} of {s['requested']} requested (only {s['available']} available)"
        )
    return 0


def cmd_export_preference_pairs(args: argparse.Namespace) -> int:
    from ableaudit.adapters.dpo.export import export_preference_pairs

    report = export_preference_pairs(
        existing_warehouse(args.warehouse),
        args.out_dir,
        judge=args.judge,
        task=args.task,
        arms=args.arm or None,
        model_ids=args.model or None,
        image_root=args.image_root,
        formats=tuple(args.format or ("jsonl", "parquet")),
        heldout_share=args.heldout_share,
    )
    print(report.summary())
    return 0


def add_export_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`ableaudit export annotation-sample|preference-pairs`."""
    exp = sub.add_parser("export", help="write files for people").add_subparsers(
        dest="what", required=True
    )
    p = exp.add_parser(
        "annotation-sample", parents=[common], help="a stratified sample for human annotators"
    )
    p.add_argument("out_dir", type=Path, help="folder to write the sample files into")
    p.add_argument(
        "--kind",
        choices=["rubric", "contrastive"],
        default="rubric",
        help="rate single responses (rubric) or neutral/disability pairs (contrastive)",
    )
    p.add_argument(
        "--size-per-domain", type=int, default=200, help="items per domain (the paper used 200)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the stratified draw")
    p.add_argument("--query-set", help="only this query set (default: every query set)")
    p.add_argument("--model", action="append", help="only this model_id (repeatable)")
    p.add_argument(
        "--dimensions",
        help="a judge's dimension set file: rate its dimensions (with --kind contrastive)",
    )
    p.set_defaults(func=cmd_export_annotation_sample)
    p = exp.add_parser(
        "preference-pairs", parents=[common], help="flagged pairs in TRL's DPO layout"
    )
    p.add_argument(
        "out_dir", type=Path, help="folder to write train/heldout files and the manifest into"
    )
    p.add_argument(
        "--judge", help="the contrastive judge whose flags choose the pairs (default: the only one)"
    )
    p.add_argument(
        "--task",
        choices=["text", "vision"],
        default="text",
        help="text pairs, or a VLM audit's pairs",
    )
    p.add_argument(
        "--arm", action="append", help="only pairs of this arm (repeatable; default: the baseline)"
    )
    p.add_argument("--model", action="append", help="only this model_id (repeatable)")
    p.add_argument(
        "--image-root",
        type=Path,
        help="vision: the audit's image_root, under which images are named",
    )
    p.add_argument(
        "--format",
        action="append",
        choices=["jsonl", "parquet"],
        help="file format (repeatable; default: both)",
    )
    p.add_argument(
        "--heldout-share",
        type=float,
        help="check that the warehouse was built with this var('preference_heldout_share')",
    )
    p.set_defaults(func=cmd_export_preference_pairs)
