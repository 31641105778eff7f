"""`ableaudit view`, for ``ableaudit/cli/main.py`` to wire: the local viewer of docs/viewer.md."""

from __future__ import annotations

import argparse


def _port(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = -1
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a port: give a number from 1 to 65535, or 0 for any free port"
        )
    return n


def cmd_view(args: argparse.Namespace) -> int:
    from ableaudit.viewer.server import serve
    from ableaudit.viewer.sources import resolve

    serve(resolve(args.warehouse), args.port)
    return 0


def add_view_parser(sub, common: argparse.ArgumentParser) -> None:
    from ableaudit.viewer import DEFAULT_PORT

    p = sub.add_parser(
        "view",
        parents=[common],
        help="a local web viewer over the published copy: the report, pairs, comparisons, ratings",
        description="Serve a viewer on 127.0.0.1 over the published copy of the warehouse (never "
        "the live file): the report's pages, a search over the pairs, two runs, revisions or "
        "models side by side, and rating answers blind to the model, each rating landed in the "
        "live warehouse as a landing (docs/viewer.md). Ctrl-C stops it.",
    )
    p.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"the port on 127.0.0.1 to serve on (default: {DEFAULT_PORT}; 0: any free port)",
    )
    p.set_defaults(func=cmd_view)
