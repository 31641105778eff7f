"""`ableaudit import ...`, for ``ableaudit/cli/main.py`` to wire: land data made elsewhere
(responses, query sets, human ratings, image sets, COCO images; verdicts through
``ableaudit.cli.judges``), each import one landing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ableaudit.cli.judges import add_import_judgments_parser
from ableaudit.cli.landings import recorded
from ableaudit.errors import require_file
from ableaudit.warehouse import warehouse_path


def _ensure_prompts(wh: Path) -> None:
    """Build the prompts an import checks against, unless the warehouse holds them as built
    from the same seeds, models and query sets (ableaudit.dbt.prompts)."""
    from ableaudit.dbt.prompts import ensure_prompts

    ensure_prompts(wh)


def cmd_import_responses(args: argparse.Namespace) -> int:
    from ableaudit.ingest.responses import check_file, import_responses

    wh = warehouse_path(args.warehouse)
    require_file(args.file, "responses file")
    check_file(args.file)  # the file's own faults, before dbt prepares the prompts (a minute)
    _ensure_prompts(wh)
    with recorded(wh, "import-responses", args.file, file=args.file):
        report = import_responses(
            args.file, wh, default_query_set=args.query_set, replace=args.replace
        )
    print(
        f"Landed from {args.file}: {report.inserted} new, {report.unchanged} already present, {report.replaced} replaced"
    )
    print("Run `ableaudit build` to score them and refresh the marts.")
    return 0


def cmd_import_queries(args: argparse.Namespace) -> int:
    from ableaudit.ingest.querysets import check_query_set_name, land_query_set, read_accesseval

    check_query_set_name(args.query_set)
    if args.file is not None:
        require_file(args.file, "AccessEval CSV")
    wh = warehouse_path(args.warehouse)
    loaded = read_accesseval(args.file, strict=not args.lenient)
    print(loaded.summary())
    source = args.file or f"query set {args.query_set} from the hub"
    with recorded(wh, "import-queries", source, file=args.file):
        n = land_query_set(
            wh, loaded, query_set=args.query_set, source_file=str(args.file) if args.file else None
        )
    print(
        f"Landed {n} prompts as query_set {args.query_set!r} in {wh}. Audit them with `query_set: {args.query_set}` in a config."
    )
    return 0


def cmd_import_annotations(args: argparse.Namespace) -> int:
    from ableaudit.ingest.annotations import import_annotations

    require_file(args.file, "ratings file")
    wh = warehouse_path(args.warehouse)
    with recorded(wh, "import-annotations", args.file, file=args.file):
        report = import_annotations(args.file, wh)
    print(report)
    print("Run `ableaudit build` to refresh agreement, annotator_agreement and disputed_items.")
    return 0


def cmd_import_images(args: argparse.Namespace) -> int:
    from ableaudit.ingest.images import (
        ImageSetError,
        land_images,
        load_manifest_csv,
        load_pairs_tree,
    )

    wh = warehouse_path(args.warehouse)
    src = Path(args.source).expanduser()
    if src.is_dir():
        if args.image_root:
            raise ImageSetError(
                "--image-root is for a manifest CSV; a folder is read as a PAIRS tree and is its own root"
            )
        loaded = load_pairs_tree(src, args.image_set, max_bytes=args.max_image_bytes)
    elif src.is_file():
        if not args.image_root:
            raise ImageSetError(
                f"{src} is a manifest CSV: pass --image-root, the folder its paths are relative to"
            )
        loaded = load_manifest_csv(
            src, args.image_root, args.image_set, max_bytes=args.max_image_bytes
        )
    else:
        raise ImageSetError(f"{src} is neither a PAIRS folder nor a manifest CSV file")
    print(loaded.summary())
    with recorded(wh, "import-images", src, file=src if src.is_file() else None):
        report = land_images(wh, loaded, replace=args.replace)
    print(f"Landed image set {args.image_set!r} in {wh}: {report.as_dict()}")
    print(
        f"Audit it with a `vision:` block holding `image_set: {args.image_set}` and `image_root: {loaded.root}` "
        f"(and, for a manifest, `manifest: {src if src.is_file() else ''}`) beside a target with `task: vision`."
    )
    return 0


def _positive_int(value: str) -> int:
    try:
        n = int(value.replace("_", ""))
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number of bytes")
    return n


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


def add_import_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`ableaudit import annotations|judgments|responses|queries|images|coco`."""
    imp = sub.add_parser("import", help="land data made elsewhere").add_subparsers(
        dest="what", required=True
    )
    p = imp.add_parser(
        "annotations", parents=[common], help="human ratings (wide or long CSV, JSONL, Parquet)"
    )
    p.add_argument("file", type=Path, help="the ratings file")
    p.set_defaults(func=cmd_import_annotations)
    add_import_judgments_parser(imp, common)
    p = imp.add_parser("responses", parents=[common], help="responses as CSV, JSONL or Parquet")
    p.add_argument("file", type=Path, help="the responses file (columns: see docs/importing.md)")
    p.add_argument(
        "--query-set", default="ableaudit", help="query set of rows without a query_set column"
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace landed rows whose text changed (the old rows go to raw.generation_history)",
    )
    p.set_defaults(func=cmd_import_responses)
    p = imp.add_parser(
        "queries",
        parents=[common],
        help="the published AccessEval CSV (local file, or the hub when online)",
    )
    p.add_argument(
        "file",
        type=Path,
        nargs="?",
        help="the AccessEval CSV (default: fetched from the hub when online)",
    )
    p.add_argument(
        "--query-set", default="accesseval", help="name to land the set under (default: accesseval)"
    )
    p.add_argument(
        "--lenient", action="store_true", help="report unresolvable rows instead of stopping"
    )
    p.set_defaults(func=cmd_import_queries)
    p = imp.add_parser(
        "images",
        parents=[common],
        help="an image set: a PAIRS folder ({occupations,status,potential_crime}/<scenario>/<race>_<gender>[n].png) "
        "or a manifest CSV (image_id, path, scenario, gender, race, ...)",
    )
    p.add_argument("source", type=Path, help="the PAIRS data/ folder, or a manifest CSV")
    p.add_argument(
        "--image-set", default="pairs", help="name of the set (a vision generation's query_set)"
    )
    p.add_argument("--image-root", help="manifest only: the folder its paths are relative to")
    _add_image_flags(p)
    p.set_defaults(func=cmd_import_images)
    _add_import_coco_parser(imp, common)


def _add_import_coco_parser(
    imp: argparse._SubParsersAction, common: argparse.ArgumentParser
) -> None:
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
    _add_image_flags(p)
    p.set_defaults(func=cmd_import_coco)


def _add_image_flags(p: argparse.ArgumentParser) -> None:
    """The flags of both image imports (`import images`, `import coco`)."""
    from ableaudit.media import MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_ENV

    p.add_argument(
        "--replace",
        action="store_true",
        help="accept new bytes under image ids audits already used",
    )
    p.add_argument(
        "--max-image-bytes",
        type=_positive_int,
        metavar="N",
        help="refuse image files over N bytes, checked by their size before they are read "
        f"(default: ${MAX_IMAGE_BYTES_ENV}, else {MAX_IMAGE_BYTES}, i.e. 50 MiB)",
    )
