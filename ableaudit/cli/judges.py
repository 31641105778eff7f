"""Command-line entry points of the judges, for ``ableaudit/cli/main.py`` to wire.

``ableaudit judge --config FILE`` runs the config's judges alone, on what has
already landed (no generation; dbt builds only the models the judges read), on the
config's cluster when it names one (``task_runner``). ``ableaudit import judgments FILE``
lands verdicts produced elsewhere (see ``importing.py`` for the columns).
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path
from typing import Any

from ableaudit.warehouse import existing_warehouse, warehouse_path


def judge_command(
    config: str | Path, warehouse: str | Path | None = None, run_id: str | None = None
) -> dict[str, Any]:
    """Run every judge of the config on landed generations; returns {judge: {kind: counts}}."""
    from ableaudit.audit.runners import lands_in_flow
    from ableaudit.config import ConfigError, load_config
    from ableaudit.judges.runner import progress_bars, run_judges, with_vision_judges

    cfg = load_config(config)
    if not cfg.judges:
        raise ConfigError(
            f"{config} lists no `judges:`; add one (see docs/judges.md) to run the judges"
        )
    from ableaudit.cli.landings import recorded

    wh, run = warehouse_path(warehouse), run_id or f"judge-{uuid.uuid4()}"
    with recorded(wh, "judge", config, file=config, run_id=run):
        if lands_in_flow(cfg.task_runner):
            # on the config's cluster, the flow landing what the workers return
            from ableaudit.audit.flow import judge_on_cluster
            from ableaudit.audit.prefect_server import temporary_server

            with temporary_server():
                return judge_on_cluster(config=str(config), warehouse=str(wh), run_id=run)
        with progress_bars() as progress:
            return with_vision_judges(
                cfg, lambda scoped: run_judges(wh, scoped, run, progress=progress)
            )


def import_judgments_command(file: str | Path, warehouse: str | Path | None = None):
    from ableaudit.cli.landings import recorded
    from ableaudit.ingest.judgments import import_judgments

    wh, run = warehouse_path(warehouse), f"import-{uuid.uuid4()}"
    with recorded(wh, "import-judgments", file, file=file, run_id=run):
        return import_judgments(file, wh, run_id=run)


def cmd_judge(args: argparse.Namespace) -> int:
    from ableaudit.audit.preflight import preflight

    # the judges' models and servers, checked before dbt builds what they read
    config, _ = preflight(
        args.config, existing_warehouse(getattr(args, "warehouse", None)), judges_only=True
    )
    counts = judge_command(config, getattr(args, "warehouse", None))
    for judge, kinds in counts.items():
        for kind, c in kinds.items():
            print(
                f"{judge} {kind}: {c['verdicts']} verdicts, {c['cached']} cached, {c['called']} judged "
                f"({c['parsed']} parsed, {c['repaired']} repaired, {c['unparseable']} unparseable, {c['errors']} errors)"
            )
    print(
        json.dumps(counts, indent=2)
        if getattr(args, "json", False)
        else "Run `ableaudit build` to refresh the marts (judge_score, interpretive_shift, judgment_quality)."
    )
    return 0


def cmd_import_judgments(args: argparse.Namespace) -> int:
    from ableaudit.errors import require_file

    require_file(args.file, "verdicts file")
    report = import_judgments_command(args.file, getattr(args, "warehouse", None))
    print(
        f"Landed judgments from {args.file}: {report.inserted} new, {report.unchanged} already present, "
        f"{report.retried} replaced errors"
    )
    print("Run `ableaudit build` to refresh the marts.")
    return 0


def add_judge_parser(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    """`ableaudit judge --config FILE`."""
    p = sub.add_parser(
        "judge", parents=[common], help="run the config's judges on landed generations"
    )
    p.add_argument("--config", required=True, type=Path, help="audit config with a `judges:` list")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(func=cmd_judge)
    return p


def add_import_judgments_parser(
    imp: argparse._SubParsersAction, common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    """`ableaudit import judgments FILE`."""
    p = imp.add_parser(
        "judgments", parents=[common], help="judge verdicts made elsewhere (CSV, JSONL or Parquet)"
    )
    p.add_argument(
        "file",
        type=Path,
        help="the verdicts file (CSV, JSONL or Parquet; columns: see docs/judges.md)",
    )
    p.set_defaults(func=cmd_import_judgments)
    return p
