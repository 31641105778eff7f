"""``ableaudit history`` and ``ableaudit forget``, for ``ableaudit/cli/main.py`` to wire.

Every call that lands data is one landing (raw.landings); ``history`` lists them and
``forget LANDING_ID`` removes one landing's rows, then rebuilds what depends on them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ableaudit.warehouse import existing_warehouse


def rows_text(rows: dict[str, int]) -> str:
    """'3 rows of generations, 1 row of runs' for a landing's rows per table."""
    return (
        ", ".join(f"{n} row{'s' * (n != 1)} of {table}" for table, n in sorted(rows.items()))
        or "no rows"
    )


def landing_line(landing: dict[str, Any]) -> str:
    """One landing in a sentence: id, kind, source and when."""
    when = landing["started_at"]
    stamp = f"{when:%Y-%m-%d %H:%M:%S}" if when is not None else "time unknown"
    return (
        f"{landing['landing_id']} ({landing['kind']}, {landing['source'] or 'no source'}, {stamp})"
    )


@contextmanager
def recorded(
    warehouse: str | Path | None,
    kind: str,
    source: str | Path | None,
    file: str | Path | None = None,
    run_id: str | None = None,
) -> Iterator[None]:
    """One landing around an import command; says its id and how to undo it once it has landed."""
    from ableaudit.warehouse.landing import recording

    with recording(warehouse, kind, source, file=file, run_id=run_id) as current:
        yield
    if current.wrote and current.rows:
        print(
            f"Landing {current.landing_id}: {rows_text(current.rows)}. "
            f"Undo it with `ableaudit forget {current.landing_id}`."
        )
    elif current.wrote:
        print("Nothing new (every row had landed already): no landing recorded.")


def _existing(warehouse: str | None) -> Path:
    return existing_warehouse(warehouse)


def _json_default(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def cmd_history(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ableaudit.warehouse.forgetting import history

    wh = _existing(args.warehouse)
    landings = history(wh)
    if args.json:
        print(json.dumps(landings, indent=2, default=_json_default))
        return 0
    if not landings:
        print(f"No landings in {wh} yet.")
        return 0
    table = Table(title=f"Landings of {wh}", title_justify="left")
    for name, style in (
        ("landing id", "bold"),
        ("started", None),
        ("kind", None),
        ("source", None),
        ("rows", None),
        ("status", None),
    ):
        table.add_column(name, style=style, overflow="fold")
    for landing in landings:
        when = landing["started_at"]
        table.add_row(
            landing["landing_id"],
            f"{when:%Y-%m-%d %H:%M:%S}" if when else "",
            landing["kind"],
            landing["source"] or "",
            rows_text(landing["rows"]),
            landing["status"],
        )
    Console(width=max(Console().width, 140), highlight=False).print(table)
    print("Undo one with `ableaudit forget LANDING_ID`.")
    return 0


def cmd_forget(args: argparse.Namespace, build: Callable[[Path], None]) -> int:
    from ableaudit.warehouse.forgetting import LandingError, forget, plan_forget

    wh = _existing(args.warehouse)
    plan = plan_forget(wh, args.landing_id)
    landing = plan.landing
    restored = f"; {plan.restored} generations it superseded come back" if plan.restored else ""
    print(f"Landing {landing_line(landing)}: removes {rows_text(plan.rows)}{restored}.")
    if not args.yes:
        if not sys.stdin.isatty():
            raise LandingError("not a terminal to confirm at; pass --yes to forget it")
        answer = input(f"Forget landing {landing['landing_id']}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("Nothing forgotten.")
            return 0
    done = forget(wh, landing["landing_id"])
    print(
        f"Forgot landing {landing['landing_id']}: removed {rows_text(done.rows)}"
        + (f", put back {done.restored} superseded generations" if done.restored else "")
        + ". It stays in `ableaudit history` as 'forgotten'."
    )
    if args.no_build:
        print("Run `ableaudit build` to rebuild the marts without it.")
        return 0
    build(wh)
    return 0


def add_landing_parsers(
    sub: argparse._SubParsersAction,
    common: argparse.ArgumentParser,
    build: Callable[[Path], None],
) -> None:
    """`ableaudit history` and `ableaudit forget LANDING_ID`; ``build`` is what `ableaudit build` runs."""
    p = sub.add_parser(
        "history", parents=[common], help="list the landings: every call that landed data"
    )
    p.add_argument("--json", action="store_true", help="print the landings as JSON")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser(
        "forget",
        parents=[common],
        help="remove one landing's rows from raw.*, then rebuild (see `ableaudit history`)",
    )
    p.add_argument("landing_id", help="the landing's id (or a unique start of it)")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--no-build", action="store_true", help="only forget; skip the build that `build` runs"
    )
    p.set_defaults(func=lambda args: cmd_forget(args, build))
