"""dbt on part of the warehouse, or with other vars: what the judges, the prompts,
`ableaudit gate` and the training flows build before they read it, and what that does to the
build's stamp (docs/incremental.md, "What each command does to the stamp"). The whole build is
``ableaudit.build.build_and_publish``."""

from __future__ import annotations

import os
from collections.abc import Sequence


def build_selected(
    warehouse: str | os.PathLike | None,
    select: Sequence[str],
    vars: str | None = None,
    command: str = "build",
) -> str:
    """``dbt <command> --select <select...>`` (with ``--vars vars``) on part of the warehouse:
    what the judges, the prompts, `ableaudit gate` and the training flows build before they
    read it. Returns the dbt invocation id.

    With the project's vars (``vars`` None) under the project, libraries and settings of the
    build whose stamp holds, the nodes it builds are what that build's settings make of the
    raw rows: the stamp is carried over to this command when it succeeds, and the next
    `ableaudit build` leaves out what it would (a failed command leaves it invalid). With other
    vars, or settings that differ from the stamp's, the stamp is dropped before dbt starts: the
    next `ableaudit build` builds every node and brings back what the project's vars make."""
    from ableaudit.dbt import build_stamp, runner
    from ableaudit.warehouse import warehouse_path

    wh = warehouse_path(warehouse)
    stamp = build_stamp.last_stamp(wh) if vars is None else None
    same = stamp is not None and build_stamp.project_checks_passed(
        stamp, build_stamp.project_inputs(None)
    )
    stamped = build_stamp.stamped_invocation(wh) if same else None
    if stamped is None:
        build_stamp.forget(wh)
    extra = ["--vars", vars] if vars else []
    invocation = runner.run_dbt([command, "--select", *select, *extra], wh)
    if stamped is not None:
        build_stamp.carry(wh, stamped, invocation)
    return invocation
