"""``ableaudit score``: the per-text scorers outside dbt, for ``ableaudit/cli/main.py`` to wire.

Runs the Prefect flow ``score`` (``ableaudit.scoring.flow``) under the same
temporary Prefect server as an audit, and says what landed and how to undo it.
"""

from __future__ import annotations

import argparse
import json

from ableaudit.cli.landings import rows_text


def _at_least_one(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: give a whole number, 1 or more")
    return n


def cmd_score(args: argparse.Namespace) -> int:
    from ableaudit.audit.prefect_server import temporary_server
    from ableaudit.cli.landings import _existing
    from ableaudit.scoring import runners, texts

    wh = _existing(args.warehouse)
    names = texts.check_scorers(args.scorer or list(texts.default_scorers()))
    runners.runner(args.task_runner)  # an unknown name stops here, before Prefect starts
    with temporary_server():
        from ableaudit.scoring.flow import score

        summary = score(
            warehouse=str(wh),
            scorers=names,
            batch_size=args.batch_size,
            task_runner=args.task_runner,
            workers=args.workers,
            group_batches=args.group_batches,
            dask_address=args.dask_address,
        )
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    pending = summary["pending"]
    if not any(pending.values()):
        print(f"Nothing to score: every text has a score of {', '.join(names)} already.")
        return 0
    rate = sum(summary["scored"].values()) / max(summary["seconds"], 1e-9)
    print(
        f"Scored {', '.join(f'{n} {name}' for name, n in summary['scored'].items())} texts on "
        f"{summary['workers']} {summary['task_runner']} workers in {summary['seconds']:.1f} s "
        f"({rate:,.0f} scores/s)."
    )
    if summary["landing_id"]:
        print(
            f"Landing {summary['landing_id']}: "
            f"{rows_text({'text_scores': summary['landed']} if summary['landed'] else {})}. "
            f"Undo it with `ableaudit forget {summary['landing_id']}`."
        )
    print("Run `ableaudit build`: the score models take these scores instead of scoring again.")
    return 0


def add_score_parser(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    """`ableaudit score [--scorer NAME] [--task-runner NAME] [--workers N] [--batch-size N]`."""
    from ableaudit.scoring.runners import RUNNERS
    from ableaudit.scoring.texts import default_scorers, scorer_models

    p = sub.add_parser(
        "score",
        parents=[common],
        help="score the texts not scored yet outside dbt, on a Prefect task runner",
        description="Score every response text the per-text scorers have not scored, as a "
        "Prefect map over text batches, and land the scores in raw.text_scores; the next "
        "`ableaudit build` takes them instead of scoring in dbt (docs/scale-out.md).",
    )
    p.add_argument(
        "--scorer",
        action="append",
        choices=sorted(scorer_models()),
        help=f"score with this scorer (repeatable; default: {', '.join(default_scorers())}; "
        "regard loads its classifier, $ABLEAUDIT_REGARD_MODEL, in every worker)",
    )
    p.add_argument(
        "--task-runner",
        default="thread",
        choices=list(RUNNERS),
        help="where the batches run: " + "; ".join(f"{r.name}: {r.help}" for r in RUNNERS.values()),
    )
    p.add_argument(
        "--workers",
        type=_at_least_one,
        help="the task runner's workers (default: the cores available here)",
    )
    p.add_argument(
        "--batch-size",
        type=_at_least_one,
        default=2048,
        help="texts per task (default: 2048)",
    )
    p.add_argument(
        "--group-batches",
        type=_at_least_one,
        help="batches landed per transaction (default: twice the workers)",
    )
    p.add_argument(
        "--dask-address",
        metavar="ADDRESS",
        help="with --task-runner dask: the scheduler of a running Dask cluster, "
        "e.g. tcp://10.0.0.5:8786 (default: a local cluster of --workers processes)",
    )
    p.add_argument("--json", action="store_true", help="print what it did as JSON")
    p.set_defaults(func=cmd_score)
    return p
