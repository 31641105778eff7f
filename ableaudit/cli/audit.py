"""`ableaudit audit`, for ``ableaudit/cli/main.py`` to wire: the audit flow on a config, or on
one served model (``--model``, ``--base-url``), its exit statuses and what it prints at the end.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ableaudit import PROJECT_ROOT
from ableaudit.cli.gates import EXIT_GATE_FAILED
from ableaudit.errors import UsageError
from ableaudit.warehouse import warehouse_path

if TYPE_CHECKING:
    from ableaudit.config import AuditConfig

# One query to start from; docs/bi.md has more.
EXAMPLE_QUERY = (
    "select model_id, arm, metric, n_pairs, degradation_pct "
    "from degradation where slice = 'overall' order by all;"
)

# Exit statuses (see docs/running.md): a fixable error; an audit that left failed requests.
# Exit statuses of an audit (see docs/running.md): one that left failed requests; one stopped
# by Ctrl-C before its flow took the signal over.
EXIT_INCOMPLETE = 3
EXIT_STATUS_SIGINT = 130


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
    return _queries(value, " per domain")


def _queries(value: str, per: str = "") -> int:
    """A number of neutral queries, 1 or more (--first-look; --subset, ``per`` domain)."""
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        more = " or 'all'" if per else ""
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a number of neutral queries{per} (1 or more){more}"
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
        config, cfg = preflight(config, wh)
        if args.first_look:
            _check_first_look(args, config, cfg)
        return _run_audit(args, config, wh)


def _run_audit(args: argparse.Namespace, config: Path, wh: Path) -> int:
    from ableaudit.audit.prefect_server import temporary_server

    try:
        with temporary_server():
            if args.first_look:
                code = _first_look(args, config, wh)
                if code:
                    return code
            return _audit(args, config, wh)
    except KeyboardInterrupt:  # before the flow could take the signal over: nothing generated
        print(f"\nableaudit: stopped by Ctrl-C (SIGINT). Resume with: {_same_command(args)}")
        return EXIT_STATUS_SIGINT


def _flow(
    args: argparse.Namespace, config: Path, wh: Path, first_look: int | None = None
) -> tuple[int, dict]:
    """The audit flow on ``config``: (0, its summary), or (an exit status, {}) once the
    reason is printed."""
    from ableaudit.audit.flow import audit as flow
    from ableaudit.audit.runs import AuditIncomplete, AuditInterrupted
    from ableaudit.gates import GateBlocked
    from ableaudit.stopping import EXIT_STATUS

    try:
        return 0, flow(
            config=str(config),
            warehouse=str(wh),
            build=False if args.no_build else None,
            first_look=first_look,
        )
    except AuditIncomplete as err:
        print(f"ableaudit: audit incomplete: {err}", file=sys.stderr)
        return EXIT_INCOMPLETE, {}
    except AuditInterrupted as stop:
        print(
            f"\nableaudit: {stop}.\nThe run is marked 'interrupted' in raw.runs of {wh}. Resume "
            f"with the same command (answers already landed are not asked for again):\n"
            f"  {_same_command(args)}"
        )
        return EXIT_STATUS[stop.signum], {}
    except GateBlocked as err:
        print(f"ableaudit: release gate failed: {err}", file=sys.stderr)
        return EXIT_GATE_FAILED, {}


def _check_first_look(args: argparse.Namespace, config: Path, cfg: AuditConfig) -> None:
    """--first-look needs text targets and a build (``cfg``: the config preflight parsed)."""
    if not cfg.text_targets:
        raise UsageError(f"--first-look shows text targets first, and {config} has none")
    if args.no_build or not cfg.build:
        raise UsageError(
            "--first-look prints rates, which need a build: leave out --no-build (or `build: false`)"
        )


def _first_look(args: argparse.Namespace, config: Path, wh: Path) -> int:
    """``--first-look N``: N neutral queries audited, built and printed before the whole audit."""
    import time

    from ableaudit.report.headline_table import headline

    started = time.monotonic()
    code, summary = _flow(args, config, wh, first_look=args.first_look)
    if code:
        return code
    look = summary["first_look"]
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    print(
        f"\nFirst look ({look['queries']} of {look['of']} neutral queries, {minutes}m{seconds:02d}s); "
        "the whole audit goes on and asks only for the rest:\n"
    )
    print(headline(summary["published"]))
    return 0


def _audit(args: argparse.Namespace, config: Path, wh: Path) -> int:
    from ableaudit.audit.flow import result_paths

    code, summary = _flow(args, config, wh)
    if code:
        return code
    print()
    print(f"Audit finished (run {summary['run_id']}).")
    for name, counts in summary["targets"].items():
        print(f"  {name}: {counts}")
    if summary.get("published"):
        from ableaudit.report.headline_table import headline

        print(
            "\nDoes the model answer disabled people worse? Per model, arm and metric (all pairs):\n"
        )
        print(headline(summary["published"]))
        print()
        from ableaudit.report.headline_table import categories

        if text := categories(summary["published"], only_differing=True):
            print(text)
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
        print(
            f"Query it (more in docs/bi.md): duckdb -readonly {summary['published']} "
            f'"{EXAMPLE_QUERY}"'
        )
    return 0


def _same_command(args: argparse.Namespace) -> str:
    """The command line that started this audit, to run again (a URL's credentials left out:
    they are never shown)."""
    from ableaudit.keys import strip_url_credentials

    shown = [strip_url_credentials(a) for a in args.argv]
    hint = "" if shown == args.argv else "  (with the URL credentials you gave, left out here)"
    return shlex.join(["ableaudit", *shown]) + hint


def add_audit_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`ableaudit audit [--config FILE | --model NAME --base-url URL ...]`."""
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
        "--first-look",
        type=_queries,
        metavar="N",
        help="first audit, build and summarise N neutral queries (one per domain), then the whole "
        "audit, which asks only for the rest: a first result in minutes (`make audit` uses 2)",
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
