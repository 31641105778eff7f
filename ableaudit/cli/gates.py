"""`ableaudit gate`, for ``ableaudit/cli/main.py`` to wire: the release gate of docs/gates.md."""

from __future__ import annotations

import argparse
from pathlib import Path

# A release blocked by an error rule (docs/gates.md); 0 when it may go, 2 a fixable error.
EXIT_GATE_FAILED = 4


def cmd_gate(args: argparse.Namespace) -> int:
    from ableaudit.gates.command import gate_command
    from ableaudit.warehouse import existing_warehouse

    gates_file = args.gates
    if gates_file is None and args.config is not None:
        from ableaudit.config import ConfigError, load_config

        cfg = load_config(args.config)
        gates_file = cfg.gates_path(args.config)
        if gates_file is None:
            raise ConfigError(
                f"{args.config} has no `gates:`; add `gates: <gates file>` or pass --gates FILE"
            )
    report = gate_command(
        existing_warehouse(args.warehouse), gates_file, args.run, args.junit, args.vars
    )
    return 0 if report.ok else EXIT_GATE_FAILED


def add_gate_parser(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "gate",
        parents=[common],
        help="release gates: verdicts of a gates file on a run; exit 4 when an error rule fails",
        description="Compute the verdicts of a gates file (docs/gates.md) on the warehouse, print "
        "them and exit 4 when an error rule blocks the release (0: it may go; 2: a mistake to "
        "fix, e.g. in the gates file). Without --gates or --config, read the verdicts the last "
        "build left in gate_results.",
    )
    p.add_argument(
        "--gates", type=Path, help="the gates file (YAML; see configs/gates.example.yml)"
    )
    p.add_argument(
        "--config", type=Path, help="an audit config whose `gates:` names the gates file"
    )
    p.add_argument("--run", help="the run to judge (default: the latest run of every target)")
    p.add_argument("--junit", type=Path, help="write the verdicts as JUnit XML here")
    p.add_argument(
        "--vars", help="dbt vars of the build, as YAML, e.g. '{degradation_threshold: 0.1}'"
    )
    p.set_defaults(func=cmd_gate)
