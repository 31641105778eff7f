"""`ableaudit`: the command line.

Every command takes --warehouse (default: $ABLEAUDIT_WAREHOUSE, else
warehouse/ableaudit.duckdb). Exit status: 0 done; 1 a crash (a traceback); 2 an error a
user can fix (one message); 3 an audit that ran to its end but left some requests failed
(the message counts them; running the same command again sends only those); 4 a release
gate blocked by an error rule (`ableaudit gate`, docs/gates.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ableaudit import PROJECT_ROOT, __version__
from ableaudit.cli.gates import EXIT_GATE_FAILED, add_gate_parser
from ableaudit.cli.judges import add_import_judgments_parser, add_judge_parser
from ableaudit.warehouse import warehouse_path

EXAMPLE_QUERIES = """\
-- 1. How often is the disability-aware answer worse, per metric?
select model_id, arm, metric, n_pairs, degradation_pct
from degradation where slice = 'overall' order by model_id, arm, metric;

-- 2. Which disability categories fare worst on sentiment?
select slice_value as disability, n_pairs, degradation_pct
from degradation where slice = 'disability' and metric = 'vader'
order by degradation_pct desc;

-- 3. What was excluded, and why?
select * from data_quality;
"""

# Exit statuses (see docs/running.md): a fixable error; an audit that left failed requests.
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3


def cmd_audit(args: argparse.Namespace) -> int:
    from ableaudit.audit.flow import audit as flow
    from ableaudit.audit.runs import AuditIncomplete
    from ableaudit.gates import GateBlocked

    wh = warehouse_path(args.warehouse)
    try:
        summary = flow(
            config=str(args.config), warehouse=str(wh), build=False if args.no_build else None
        )
    except AuditIncomplete as err:
        print(f"ableaudit: audit incomplete: {err}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except GateBlocked as err:
        print(f"ableaudit: release gate failed: {err}", file=sys.stderr)
        return EXIT_GATE_FAILED
    print()
    print(f"Audit finished (run {summary['run_id']}).")
    for name, counts in summary["targets"].items():
        print(f"  {name}: {counts}")
    if summary.get("published"):
        from ableaudit.cli.headline import headline

        print(
            "\nDoes the model answer disabled people worse? Per model, arm and metric (all pairs):\n"
        )
        print(headline(summary["published"]))
        print()
    print(f"Warehouse (live, one writer at a time): {wh}")
    if summary.get("published"):
        print(f"Published copy for BI and ad-hoc SQL:    {summary['published']}")
        if summary.get("report"):
            print(f"Report (open it in a browser):          {summary['report']}")
        print(f"\nTry, e.g. with `duckdb -readonly {summary['published']}` or any DuckDB client:\n")
        print(EXAMPLE_QUERIES)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from ableaudit.dbt.runner import run_dbt
    from ableaudit.warehouse.publish import publish

    wh = warehouse_path(args.warehouse)
    extra = ["--vars", args.vars] if args.vars else []
    from ableaudit.report import render_report

    run_dbt(["seed"], wh)
    run_dbt(["build", *extra], wh)
    out = publish(wh, storage_version=args.storage_version)
    report = render_report(out)
    print(f"Built {wh}\nPublished {out}\nReport {report.index}")
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

    print(publish(warehouse_path(args.warehouse), storage_version=args.storage_version))
    return 0


def _ensure_prompts(wh: Path) -> None:
    from ableaudit.dbt.runner import run_dbt

    run_dbt(["seed"], wh)
    run_dbt(["build", "--select", "+int_prompts"], wh)


def _require_file(path: Path) -> None:
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} does not exist or is not a file; check the path")


def cmd_import_responses(args: argparse.Namespace) -> int:
    from ableaudit.ingest.responses import import_responses

    wh = warehouse_path(args.warehouse)
    _require_file(args.file)  # before dbt prepares the prompts, which takes a minute
    _ensure_prompts(wh)
    report = import_responses(args.file, wh, default_query_set=args.query_set, replace=args.replace)
    print(
        f"Landed from {args.file}: {report.inserted} new, {report.unchanged} already present, {report.replaced} replaced"
    )
    print("Run `ableaudit build` to score them and refresh the marts.")
    return 0


def cmd_import_queries(args: argparse.Namespace) -> int:
    from ableaudit.ingest.querysets import check_query_set_name, land_query_set, read_accesseval

    check_query_set_name(args.query_set)
    if args.file is not None:
        _require_file(args.file)
    wh = warehouse_path(args.warehouse)
    loaded = read_accesseval(args.file, strict=not args.lenient)
    print(loaded.summary())
    n = land_query_set(
        wh, loaded, query_set=args.query_set, source_file=str(args.file) if args.file else None
    )
    print(
        f"Landed {n} prompts as query_set {args.query_set!r} in {wh}. Audit them with `query_set: {args.query_set}` in a config."
    )
    return 0


def cmd_export_annotation_sample(args: argparse.Namespace) -> int:
    from ableaudit.ingest.annotations import export_annotation_sample

    sample = export_annotation_sample(
        warehouse_path(args.warehouse),
        args.out_dir,
        size_per_domain=args.size_per_domain,
        seed=args.seed,
        kind=args.kind,
        query_set=args.query_set,
        model_ids=args.model or None,
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


def cmd_import_annotations(args: argparse.Namespace) -> int:
    from ableaudit.ingest.annotations import import_annotations

    report = import_annotations(args.file, warehouse_path(args.warehouse))
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
        loaded = load_pairs_tree(src, args.image_set)
    elif src.is_file():
        if not args.image_root:
            raise ImageSetError(
                f"{src} is a manifest CSV: pass --image-root, the folder its paths are relative to"
            )
        loaded = load_manifest_csv(src, args.image_root, args.image_set)
    else:
        raise ImageSetError(f"{src} is neither a PAIRS folder nor a manifest CSV file")
    print(loaded.summary())
    report = land_images(wh, loaded, replace=args.replace)
    print(f"Landed image set {args.image_set!r} in {wh}: {report.as_dict()}")
    print(
        f"Audit it with a `vision:` block holding `image_set: {args.image_set}` and `image_root: {loaded.root}` "
        f"(and, for a manifest, `manifest: {src if src.is_file() else ''}`) beside a target with `task: vision`."
    )
    return 0


def cmd_export_preference_pairs(args: argparse.Namespace) -> int:
    from ableaudit.adapters.dpo.export import export_preference_pairs

    report = export_preference_pairs(
        warehouse_path(args.warehouse),
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ableaudit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--warehouse",
        help="DuckDB file (default: $ABLEAUDIT_WAREHOUSE or warehouse/ableaudit.duckdb)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("audit", parents=[common], help="run the audit flow on a config")
    p.add_argument(
        "--config",
        default=str(PROJECT_ROOT / "configs" / "default.yaml"),
        type=Path,
        help="the audit config, YAML (default: configs/default.yaml, the embedded SmolLM2 audit)",
    )
    p.add_argument(
        "--no-build", action="store_true", help="land generations only; skip dbt build and publish"
    )
    p.set_defaults(func=cmd_audit)

    storage = argparse.ArgumentParser(add_help=False)
    storage.add_argument(
        "--storage-version",
        help="DuckDB storage format of the published copy, e.g. v1.4.0 "
        "(default: $ABLEAUDIT_PUBLISH_STORAGE_VERSION, else v1.1.0, which DuckDB 1.1 and newer read)",
    )

    p = sub.add_parser(
        "build", parents=[common, storage], help="dbt seed + build, then publish a copy for BI"
    )
    p.add_argument("--vars", help="dbt vars as YAML, e.g. '{degradation_threshold: 0.1}'")
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

    add_judge_parser(sub, common)
    add_gate_parser(sub, common)

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
    p.add_argument(
        "--replace",
        action="store_true",
        help="accept new bytes under image ids audits already used",
    )
    p.set_defaults(func=cmd_import_images)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ableaudit.audit import prefect_env

    prefect_env.configure()
    args = build_parser().parse_args(argv)
    if getattr(args, "warehouse", None):
        os.environ["ABLEAUDIT_WAREHOUSE"] = str(warehouse_path(args.warehouse))
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        # ConfigError, ResponseImportError, QuerySetError, BackendError, dbt failures
        print(f"ableaudit: error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
