"""`ableaudit`: the command line.

Every command takes --warehouse (default: $ABLEAUDIT_WAREHOUSE, else
warehouse/ableaudit.duckdb). Exit status: 0 done; 1 a crash (a traceback); 2 an error a
user can fix (one message; --debug adds its traceback); 3 an audit that ran to its end but
left some requests failed (the message counts them; running the same command again sends
only those); 4 a release gate blocked by an error rule (`ableaudit gate`, docs/gates.md);
130 and 143 an audit stopped by Ctrl-C (SIGINT) or SIGTERM once what finished had landed
(running the same command again resumes it).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import tempfile
import traceback
from pathlib import Path

import duckdb

from ableaudit import PROJECT_ROOT, __version__
from ableaudit.cli.coco import add_import_coco_parser
from ableaudit.cli.gates import EXIT_GATE_FAILED, add_gate_parser
from ableaudit.cli.judges import add_import_judgments_parser, add_judge_parser
from ableaudit.cli.landings import add_landing_parsers, recorded
from ableaudit.cli.queryset import add_queryset_parser
from ableaudit.cli.scoring import add_score_parser
from ableaudit.errors import AbleauditError, UsageError, require_file
from ableaudit.warehouse import warehouse_path
from ableaudit.warehouse.connection import io_failure

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
EXIT_STATUS_SIGINT = 130
EXIT_STOPPED = (130, 143)  # Ctrl-C (SIGINT), SIGTERM: ableaudit.stopping.EXIT_STATUS


DEFAULT_CONFIG = PROJECT_ROOT / "configs" / "default.yaml"
# Flags that describe the model of a one-line endpoint audit (they need --model, not --config).
ENDPOINT_FLAGS = ("base_url", "backend", "api_key_env", "subset", "judge_model", "judge_base_url")
ENDPOINT_HEADER = (
    "The paper's audit of one served model, made by `ableaudit audit --model`; "
    "run it again with `ableaudit audit --config THIS_FILE`."
)


def _per_domain(value: str) -> int | str:
    """--subset: a number of neutral queries per domain, or 'all'."""
    if value.strip().lower() == "all":
        return "all"
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a number of neutral queries per domain (1 or more) or 'all'"
        )
    return n


def _audit_config(args: argparse.Namespace, scratch: Path) -> Path | None:
    """The config file the audit runs: --config, or the one-line endpoint audit's, written out
    (to ``scratch`` unless --print-config names a file). None: --print-config alone printed it,
    and nothing runs."""
    from ableaudit.audit.preflight import config_yaml
    from ableaudit.config import ENDPOINT_PER_DOMAIN, endpoint_config, load_config, parse_config

    given = [f"--{f.replace('_', '-')}" for f in ENDPOINT_FLAGS if getattr(args, f) is not None]
    to_file = args.print_config not in (None, "-")
    if args.model is None:
        if given:
            raise UsageError(f"{', '.join(given)} describe the model to audit: add --model NAME")
        run_from = Path(args.config or DEFAULT_CONFIG)
        if not args.print_config:
            return run_from
        if to_file and Path(args.print_config).resolve() == run_from.resolve():
            raise UsageError(f"--print-config {args.print_config} would overwrite the config")
        text = config_yaml(load_config(run_from).model_dump(mode="json", exclude_unset=True))
    else:
        if args.config is not None:
            raise UsageError(
                "--config and --model are two ways to say what to audit: give one "
                "(--print-config shows the config --model makes)"
            )
        if args.judge_base_url and not args.judge_model:
            raise UsageError("--judge-base-url is the judge's server: add --judge-model NAME")
        data = endpoint_config(
            args.model,
            _one_or_list(args.base_url),
            backend=args.backend or "openai",
            per_domain={None: ENDPOINT_PER_DOMAIN, "all": None}.get(args.subset, args.subset),
            api_key_env=args.api_key_env,
            judge_model=args.judge_model,
            judge_base_url=_one_or_list(args.judge_base_url),
        )
        parse_config(data, "the command line's --model audit")
        text = f"# {ENDPOINT_HEADER}\n{config_yaml(data)}"
        run_from = Path(args.print_config) if to_file else scratch / "endpoint.yaml"
    if args.print_config == "-":
        print(text, end="")
        return None
    out = Path(args.print_config) if to_file else run_from
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    if to_file:
        print(f"Config written to {out}", file=sys.stderr)
    return run_from


def _one_or_list(urls: list[str] | None) -> str | list[str] | None:
    """A repeated URL flag: one server, or replicas of one model."""
    return None if not urls else urls[0] if len(urls) == 1 else urls


def cmd_audit(args: argparse.Namespace) -> int:
    from ableaudit.audit.preflight import preflight

    wh = warehouse_path(args.warehouse)
    with tempfile.TemporaryDirectory(prefix="ableaudit-config-") as scratch:
        config = _audit_config(args, Path(scratch))
        if config is None:
            return 0
        # Before Prefect or dbt start: a mistake in the config surfaces in seconds.
        config, _ = preflight(config, wh)
        return _run_audit(args, config, wh)


def _run_audit(args: argparse.Namespace, config: Path, wh: Path) -> int:
    from ableaudit.audit.prefect_server import temporary_server

    try:
        with temporary_server():
            return _audit(args, config, wh)
    except KeyboardInterrupt:  # before the flow could take the signal over: nothing generated
        print(f"\nableaudit: stopped by Ctrl-C (SIGINT). Resume with: {_same_command(args)}")
        return EXIT_STATUS_SIGINT


def _audit(args: argparse.Namespace, config: Path, wh: Path) -> int:
    from ableaudit.audit.flow import audit as flow
    from ableaudit.audit.flow import result_paths
    from ableaudit.audit.runs import AuditIncomplete, AuditInterrupted
    from ableaudit.gates import GateBlocked
    from ableaudit.stopping import EXIT_STATUS

    try:
        summary = flow(
            config=str(config), warehouse=str(wh), build=False if args.no_build else None
        )
    except AuditIncomplete as err:
        print(f"ableaudit: audit incomplete: {err}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except AuditInterrupted as stop:
        print(
            f"\nableaudit: {stop}.\nThe run is marked 'interrupted' in raw.runs of {wh}. Resume "
            f"with the same command (answers already landed are not asked for again):\n"
            f"  {_same_command(args)}"
        )
        return EXIT_STATUS[stop.signum]
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
    paths = result_paths(str(wh), summary.get("published"), summary.get("report"))
    labels = {
        "warehouse": "Warehouse (live, one writer at a time)",
        "published copy": "Published copy for BI and ad-hoc SQL",
        "Parquet folder": "Parquet files of the marts",
        "report": "Report (open it in a browser)",
    }
    for name, path in paths.items():
        print(f"{labels[name] + ':':<40}{path}")
    if summary.get("published"):
        print(f"\nTry, e.g. with `duckdb -readonly {summary['published']}` or any DuckDB client:\n")
        print(EXAMPLE_QUERIES)
    return 0


def _same_command(args: argparse.Namespace) -> str:
    """The command line that started this audit, to run again (a URL's credentials left out:
    they are never shown)."""
    from ableaudit.keys import strip_url_credentials

    shown = [strip_url_credentials(a) for a in args.argv]
    hint = "" if shown == args.argv else "  (with the URL credentials you gave, left out here)"
    return shlex.join(["ableaudit", *shown]) + hint


def cmd_build(args: argparse.Namespace) -> int:
    from ableaudit.build import build_and_publish

    build_and_publish(
        warehouse_path(args.warehouse),
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

    print(publish(warehouse_path(args.warehouse), storage_version=args.storage_version))
    return 0


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


def _positive_int(value: str) -> int:
    try:
        n = int(value.replace("_", ""))
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number of bytes")
    return n


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ableaudit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    debug = "on an error, print its traceback too (default: its message alone)"
    parser.add_argument("--debug", action="store_true", help=debug)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--warehouse",
        help="DuckDB file (default: $ABLEAUDIT_WAREHOUSE or warehouse/ableaudit.duckdb)",
    )
    # also after the command (`ableaudit audit --debug`); SUPPRESS keeps the top level's value
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "audit",
        parents=[common],
        help="run the audit flow on a config, or on a served model (--model, --base-url)",
        description="Audit the targets of a config, or one model with no config file: "
        "`ableaudit audit --base-url http://127.0.0.1:8000/v1 --model NAME`. The config is "
        "checked first (keys, values, files, servers), before anything starts.",
    )
    p.add_argument(
        "--config",
        type=Path,
        help="the audit config, YAML (default: configs/default.yaml, the embedded SmolLM2 audit)",
    )
    p.add_argument(
        "--no-build", action="store_true", help="land generations only; skip dbt build and publish"
    )
    p.add_argument(
        "--model",
        help="audit this model with the paper's settings, no config file needed: the name the "
        "server serves (openai), or the backend's model (a GGUF path, a Hugging Face id)",
    )
    p.add_argument(
        "--base-url",
        action="append",
        metavar="URL",
        help="with --model: the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 "
        "(repeat for replicas; default: $OPENAI_BASE_URL, else the OpenAI API)",
    )
    p.add_argument(
        "--backend",
        help="with --model: the backend that runs it (default: openai; also llamacpp, "
        "transformers, vllm)",
    )
    p.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="with --model: the env var holding the server's API key (default: OPENAI_API_KEY; "
        "local servers need none)",
    )
    p.add_argument(
        "--subset",
        type=_per_domain,
        metavar="N|all",
        help="with --model: neutral queries per domain, each asked neutrally and for 9 disability "
        "categories (default: 2, i.e. 120 requests over 6 domains; all: the 234 queries, 2,340 "
        "requests, as in the paper)",
    )
    p.add_argument(
        "--judge-model",
        metavar="NAME",
        help="with --model: also judge the answers (rubric and contrastive) with this model",
    )
    p.add_argument(
        "--judge-base-url",
        action="append",
        metavar="URL",
        help="the judge model's server (default: the --base-url server)",
    )
    p.add_argument(
        "--print-config",
        nargs="?",
        const="-",
        metavar="PATH",
        help="print the config this command would run, as YAML, and stop; with PATH: write it "
        "there and run the audit from it (rerun with --config PATH)",
    )
    p.set_defaults(func=cmd_audit)

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

    add_judge_parser(sub, common)
    from ableaudit.build import build_and_publish

    add_landing_parsers(sub, common, build=build_and_publish)
    add_gate_parser(sub, common)
    add_score_parser(sub, common)
    add_queryset_parser(sub, common)

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
    from ableaudit.media import MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_ENV

    p.add_argument(
        "--max-image-bytes",
        type=_positive_int,
        metavar="N",
        help="refuse image files over N bytes, checked by their size before they are read "
        f"(default: ${MAX_IMAGE_BYTES_ENV}, else {MAX_IMAGE_BYTES}, i.e. 50 MiB)",
    )
    p.set_defaults(func=cmd_import_images)
    add_import_coco_parser(imp, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ableaudit import redaction
    from ableaudit.audit import prefect_env
    from ableaudit.stopping import EXIT_STATUS as STOP_STATUS
    from ableaudit.stopping import second_signal_exits, signal_name

    prefect_env.configure()
    args = build_parser().parse_args(argv)
    if not args.debug:
        prefect_env.quiet_tracebacks()
    redaction.install_log_redaction()
    args.argv = list(sys.argv[1:] if argv is None else argv)
    for arg in args.argv:
        redaction.remember_url(arg)  # a --base-url's credentials: out of every log and message
    if getattr(args, "warehouse", None):
        os.environ["ABLEAUDIT_WAREHOUSE"] = str(warehouse_path(args.warehouse))
    try:
        with second_signal_exits() as received:
            code = args.func(args)
    except KeyboardInterrupt:  # the first Ctrl-C or SIGTERM outside an audit's generation
        signum = received[0] if received else signal.SIGINT
        print(f"\nableaudit: stopped by {signal_name(signum)}.", file=sys.stderr)
        return STOP_STATUS[signum]
    except (AbleauditError, ValueError, FileNotFoundError, RuntimeError) as err:
        # AbleauditError: ConfigError, BackendError, UsageError, a missing input file; the
        # others: ResponseImportError, QuerySetError, dbt failures
        if args.debug:
            traceback.print_exc()
        print(f"ableaudit: error: {redaction.redact(str(err))}", file=sys.stderr)
        return getattr(err, "exit_code", EXIT_USAGE)
    except (OSError, duckdb.IOException) as err:  # a read-only folder, a full disk
        if (message := io_failure(err)) is None:
            raise
        if args.debug:
            traceback.print_exc()
        print(f"ableaudit: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    if argv is None and code in EXIT_STOPPED:
        # This process is the command, and it stopped: what finished is landed and the run
        # recorded. Requests still waiting on a server are abandoned rather than waited for.
        from ableaudit.audit.prefect_server import stop_temporary_server

        stop_temporary_server()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
