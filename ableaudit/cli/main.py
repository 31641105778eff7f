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
import signal
import sys
import traceback

import duckdb

from ableaudit import __version__
from ableaudit.cli.audit import add_audit_parser
from ableaudit.cli.build import add_build_parsers
from ableaudit.cli.exports import add_export_parser
from ableaudit.cli.gates import add_gate_parser
from ableaudit.cli.imports import add_import_parsers
from ableaudit.cli.judges import add_judge_parser
from ableaudit.cli.landings import add_landing_parsers
from ableaudit.cli.queryset import add_queryset_parser
from ableaudit.cli.scoring import add_score_parser
from ableaudit.cli.view import add_view_parser
from ableaudit.errors import AbleauditError
from ableaudit.warehouse import warehouse_path
from ableaudit.warehouse.connection import io_failure

# Exit statuses (see docs/running.md): a fixable error; an audit stopped by a signal. The
# audit's own (3, 130 before its flow starts) are in ableaudit.cli.audit, the gate's (4) in
# ableaudit.cli.gates.
EXIT_USAGE = 2
EXIT_STOPPED = (130, 143)  # Ctrl-C (SIGINT), SIGTERM: ableaudit.stopping.EXIT_STATUS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ableaudit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    debug = "on an error, print its traceback too (default: its message alone)"
    parser.add_argument("--debug", action="store_true", help=debug)
    verbose = "print dbt's and Prefect's log lines too (default: progress, warnings, errors and the summary; logs/dbt.log and the Prefect UI keep them)"
    parser.add_argument("-v", "--verbose", action="store_true", help=verbose)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--warehouse",
        help="DuckDB file (default: $ABLEAUDIT_WAREHOUSE or warehouse/ableaudit.duckdb)",
    )
    # also after the command (`ableaudit audit --debug`); SUPPRESS keeps the top level's value
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug)
    common.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose
    )
    sub = parser.add_subparsers(dest="command", required=True)

    add_audit_parser(sub, common)
    add_build_parsers(sub, common)
    add_judge_parser(sub, common)
    from ableaudit.build import build_and_publish

    add_landing_parsers(sub, common, build=build_and_publish)
    add_gate_parser(sub, common)
    add_score_parser(sub, common)
    add_queryset_parser(sub, common)
    add_view_parser(sub, common)

    add_export_parser(sub, common)
    add_import_parsers(sub, common)
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
    try:
        if getattr(args, "warehouse", None):
            os.environ["ABLEAUDIT_WAREHOUSE"] = str(warehouse_path(args.warehouse))
        with second_signal_exits() as received, prefect_env.terminal(args.verbose):
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
