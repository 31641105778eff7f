"""The build: dbt, publish, report and the stamp, in one function that `ableaudit build`, the
landing commands (`import ...`, `forget`) and the audit flow call (``build_and_publish``);
while every other dbt command of the package, on part of the warehouse or with other vars,
goes through ``ableaudit.dbt.selected.build_selected``, which says what it did to the stamp
(docs/incremental.md, "What each command does to the stamp")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Built:
    """What a build left (or kept, when nothing changed since the last one)."""

    published: Path
    """The published copy (a DuckDB file BI tools read)."""
    report: Path
    """The report's index page."""
    skipped: bool
    """True when nothing the build reads changed since the last build that succeeded: the
    warehouse, the published copy and the report were kept as they were."""


def build_and_publish(
    wh: Path,
    vars: str | None = None,
    storage_version: str | None = None,
    all_tests: bool = False,
    force: bool = False,
    ungated: bool = False,
) -> Built:
    """What `ableaudit build` runs: one `dbt build` (seeds included), publish, report, stamp.

    The data tests are dbt's default selection (selectors.yml: every test but those of
    ``full_only_tests``, which scan every generation or pair); ``all_tests`` runs them all.
    When the warehouse holds the stamp of the last build that succeeded (no other dbt command
    ran on it since; ableaudit.dbt.build_stamp) and the project, libraries and settings
    are those it recorded, the unit tests and the data tests that read no landed row are left
    out (they passed on them then), and so are the seeds, views and models that read no landed
    row (that build left them as they would be built; selectors.yml: ``project_only_nodes``);
    when only the raw tables a landing of answers writes changed, so are the nodes that read
    none of them (``answers_landed_build``). Without such a stamp every node is built. When
    nothing the build reads changed (raw layer, project, code, libraries, settings) and what
    it left is in place, the build is skipped, unless ``force``. ``ungated`` (the audit flow
    with a gates file, whose release gate reads gate_results after the publish) leaves out the
    gate_rule tests and every narrowing, and its stamp never lets a build be skipped."""
    from ableaudit.dbt import build_stamp, runner
    from ableaudit.report import render_report
    from ableaudit.warehouse.publish import publish

    current = build_stamp.inputs(wh, vars) if wh.is_file() else None
    # read before the stamp is dropped; a forced build skips nothing and leaves out no check
    stamp = build_stamp.last_stamp(wh) if current is not None and not force else None
    last = (
        None
        if stamp is None or ungated
        else build_stamp.unchanged(wh, stamp, current, all_tests, storage_version)
    )
    project_checked = not ungated and build_stamp.project_checks_passed(stamp, current or {})
    if last is not None:
        kept = Built(
            build_stamp.kept_path(wh, last["published"]),
            build_stamp.kept_path(wh, last["report"]),
            skipped=True,
        )
        print(
            f"Nothing changed since the build of {last['built_at']} (same raw layer, project, "
            f"code, libraries and settings): kept\n  {wh}\n  {kept.published}\n  "
            f"{kept.report}\n`ableaudit build --force` builds anyway."
        )
        return kept
    build_stamp.forget(wh)
    changed = build_stamp.changed_raw_tables(stamp, current) if project_checked else None
    invocation = runner.build(
        wh,
        vars,
        all_tests=all_tests,
        project_checked=project_checked,
        changed_raw_tables=changed,
        ungated=ungated,
    )
    out = publish(wh, storage_version=storage_version)
    report = render_report(out)
    if current is None:  # a first build: it created the warehouse and read nothing landed
        current = build_stamp.inputs(wh, vars)
    build_stamp.record(
        wh, current, all_tests, storage_version, out, report.index, invocation, not ungated
    )
    print(f"Built {wh}\nPublished {out}\nReport {report.index}")
    return Built(Path(out), Path(report.index), skipped=False)
