"""`ableaudit import coco`: the COCO images that show one visible person, landed as an image set."""

from __future__ import annotations

import argparse
from pathlib import Path

from ableaudit.cli.landings import recorded
from ableaudit.warehouse import warehouse_path


def _share(value: str) -> float:
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a share of the image's area between 0 and 1, e.g. 0.05"
        )
    return share


def cmd_import_coco(args: argparse.Namespace) -> int:
    from ableaudit.ingest.coco import CocoFilter, funnel_lines, load_coco
    from ableaudit.ingest.images import land_images

    settings = CocoFilter(
        min_area_share=args.min_area_share,
        person_categories=tuple(args.person_category or CocoFilter.person_categories),
    )
    wh = warehouse_path(args.warehouse)
    loaded = load_coco(
        args.annotations, args.image_root, args.image_set, settings, max_bytes=args.max_image_bytes
    )
    print(f"{args.annotations}: " + "; ".join(funnel_lines(loaded)))
    with recorded(wh, "import-images", args.annotations, file=args.annotations):
        report = land_images(wh, loaded, replace=args.replace)
    print(f"Landed image set {args.image_set!r} in {wh}: {report.as_dict()}")
    print(
        "Run `ableaudit build` for the image_funnel mart. Audit the set with a `vision:` block "
        f"holding `image_set: {args.image_set}`, `image_root: {loaded.root}` and "
        f"`manifest: {Path(args.annotations).expanduser().resolve()}` (docs/mitigation.md)."
    )
    return 0


def add_import_coco_parser(
    imp: argparse._SubParsersAction, common: argparse.ArgumentParser
) -> None:
    from ableaudit.cli.main import _positive_int
    from ableaudit.ingest.coco import CocoFilter

    p = imp.add_parser(
        "coco",
        parents=[common],
        help="the COCO images that show one visible person (instances_*.json and a local image "
        "folder), as an image set",
        description="Keep the images of a COCO annotations file with exactly one person who is "
        "not a crowd, covering at least --min-area-share of the image, and no other person "
        "annotation; land them in raw.images and every image's verdict in raw.image_candidates "
        "(the image_funnel mart). Nothing is downloaded.",
    )
    p.add_argument("annotations", type=Path, help="COCO instances_*.json")
    p.add_argument(
        "--image-root",
        type=Path,
        required=True,
        help="the folder holding the images, e.g. val2017/",
    )
    p.add_argument(
        "--image-set", required=True, help="name of the set (a vision generation's query_set)"
    )
    p.add_argument(
        "--min-area-share",
        type=_share,
        default=CocoFilter.min_area_share,
        metavar="SHARE",
        help="the person's mask area over the image's area must reach this "
        f"(default {CocoFilter.min_area_share})",
    )
    p.add_argument(
        "--person-category",
        action="append",
        metavar="NAME",
        help="a COCO category that counts as a person (repeatable; default: person)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="accept new bytes under image ids audits already used",
    )
    p.add_argument(
        "--max-image-bytes",
        type=_positive_int,
        metavar="N",
        help="refuse image files over N bytes (as for `ableaudit import images`)",
    )
    p.set_defaults(func=cmd_import_coco)
