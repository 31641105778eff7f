"""The audit's Prefect tasks: each one step, each opening its own connection.

The flow (``ableaudit.audit.flow``) only wires these. Calls that go over the
network (a target's generations, the judges) retry with backoff when the
failure may pass (a server still starting, a dropped connection); a mistake in
the config or a missing model fails at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ableaudit.audit.generating import generate_target
from ableaudit.audit.planning import TargetPlan, audit_task, select_prompts
from ableaudit.backends.base import BackendError, GenerationCancelled
from ableaudit.config import AuditConfig, ConfigError, Judge, Target
from ableaudit.records import PlannedGeneration

RETRY_DELAYS = [2, 10, 30]


def transient(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a network step unless its error says the config or the model is wrong."""
    try:
        state.result()
    except GenerationCancelled:
        return False
    except (ConfigError, BackendError) as err:
        return bool(getattr(err, "transient", False))
    except Exception:
        return True
    return False


def network_task(name: str) -> Any:
    """A task that goes over the network: retried with backoff when its failure may pass."""
    return task(
        name=name,
        cache_policy=NO_CACHE,
        retries=len(RETRY_DELAYS),
        retry_delay_seconds=RETRY_DELAYS,
        retry_condition_fn=transient,
    )


@task(name="prepare-prompts", cache_policy=NO_CACHE)
def prepare_prompts(warehouse: str, cfg: AuditConfig, kind: str) -> list[dict[str, Any]]:
    """Build the prompts of ``kind`` ('text' | 'vision') from the seeds, unless the warehouse
    holds them as built from the same inputs (ableaudit.dbt.prompts), then select the
    config's subset."""
    from ableaudit.dbt.prompts import ensure_prompts

    ensure_prompts(Path(warehouse), audit_task(cfg, kind).table)
    return select_prompts(warehouse, cfg, kind)


@task(name="load-images", cache_policy=NO_CACHE)
def load_images(warehouse: str, cfg: AuditConfig) -> dict[str, Any]:
    """Land the audit's image set in raw.images (idempotent: unchanged files change nothing)."""
    from ableaudit.ingest.images import land_images, load_image_set

    vision = cfg.vision
    loaded = load_image_set(
        vision.image_set, vision.images_folder(), vision.manifest_path(), warehouse
    )
    report = land_images(warehouse, loaded)
    return {"images": len(loaded.records), "summary": loaded.summary(), **report.as_dict()}


@network_task("audit-target")
def audit_target(wh: str, plan: TargetPlan, run_id: str) -> dict[str, int]:
    """One target's generations (``generating.generate_target``): what is not landed yet,
    landed as it comes back. A retry (or a resumed audit) asks only for those still missing.
    After a stop request it lands what finished and returns; the flow then stops."""
    return generate_target(wh, plan, run_id, get_run_logger().info).__dict__


@network_task("generate-chunk")
def generate_chunk(
    target: Target, adapter: str | None, todo: list[PlannedGeneration], run_id: str
) -> list[dict[str, Any]]:
    """One chunk of a target's prompts, generated on a cluster worker (task_runner dask | ray):
    its raw.generations rows, returned for the flow's process to land. Never opens the
    warehouse. A retry asks the whole chunk again (nothing of it landed)."""
    rows = generate_rows(target, adapter, todo, run_id)
    get_run_logger().info("%s: %d answers generated for landing", target.name, len(rows))
    return rows


def generate_rows(
    target: Target, adapter: str | None, todo: list[PlannedGeneration], run_id: str
) -> list[dict[str, Any]]:
    """The rows of ``todo`` as ``target`` answers them (``generate-chunk`` without Prefect).

    Like the landing path on threads, a row's ``model_revision`` is what answered it, else the
    backend's own. When the backend is cancelled (a stop in this process), the answers that
    finished are returned and nothing that was cut off.
    """
    import contextlib

    from ableaudit.backends import make_backend
    from ableaudit.backends.base import results_in_batches
    from ableaudit.warehouse.landing import result_row

    plans = {p.generation_id: p for p in todo}
    backend = make_backend(target, adapter=adapter)
    rows: list[dict[str, Any]] = []
    try:
        revision = backend.model_revision
        requests = [p.request() for p in todo]
        with contextlib.suppress(GenerationCancelled):
            for results in results_in_batches(backend, requests, backend.concurrency):
                for r in results:
                    row = result_row(plans[r.key], r, run_id)
                    if not r.model_revision and revision:
                        row["model_revision"] = revision
                    rows.append(row)
    finally:
        backend.close()
    return rows


@network_task("judge")
def judge(warehouse: str, cfg: AuditConfig, run_id: str) -> dict[str, Any]:
    """Every judge of the config on every landed subject; cached verdicts cost nothing."""
    from ableaudit.judges.runner import progress_bars, run_judges

    with progress_bars(get_run_logger().info) as progress:
        return run_judges(warehouse, cfg, run_id, progress=progress)


@network_task("judge-chunk")
def judge_chunk(judge: Judge, items: list, run_id: str) -> dict[str, Any]:
    """One chunk of a judge's verdicts, asked on a cluster worker (task_runner dask | ray): its
    raw.judgments rows and counts, returned for the flow's process to land. Never opens the
    warehouse. A retry asks the whole chunk again (nothing of it landed)."""
    from ableaudit.judges.runner import judge_chunk_rows

    out = judge_chunk_rows(judge, items, run_id)
    get_run_logger().info(
        "judge %s: %d verdicts obtained for landing", judge.name, len(out["rows"])
    )
    return out


@task(name="build-warehouse", cache_policy=NO_CACHE)
def build_warehouse(warehouse: str, gates_file: str | None = None) -> dict[str, str]:
    """What `ableaudit build` runs (ableaudit.build.build_and_publish: dbt, publish, report and
    the stamp that lets the next build leave out what this one left as it would be built):
    the paths of the published copy and of the report's index page. With a gates file,
    gate_results holds its verdicts; the gate tests are left to ``release_gate`` so that a
    blocked release is still published."""
    from ableaudit.build import build_and_publish

    vars = None
    if gates_file is not None:
        from ableaudit.gates.command import build_vars

        vars = build_vars(gates_file)
    built = build_and_publish(Path(warehouse), vars, ungated=gates_file is not None)
    return {"published": str(built.published), "report": str(built.report)}


@task(name="release-gate", cache_policy=NO_CACHE)
def release_gate(warehouse: str) -> list[str]:
    """The verdicts of the latest run of each target that block its release (error rules)."""
    from ableaudit.gates import evaluate

    report = evaluate(warehouse)
    for row in report.rows:
        if row["verdict"] != "pass":
            get_run_logger().info("gate %s: %s", row["verdict"], row["message"])
    return [r["message"] for r in report.failed_errors]


@task(name="render-report", cache_policy=NO_CACHE)
def render_report(published: str) -> str:
    """Render the HTML report beside the published copy, and put the headline on the flow run
    (Prefect artifacts, ``link_report``)."""
    from ableaudit.report import render_report as render

    return link_report.fn(str(render(published).index), published)


@task(name="link-report", cache_policy=NO_CACHE)
def link_report(index: str, published: str) -> str:
    """Put the headline on the flow run, where the Prefect UI shows it: a table artifact of its
    rows (``audit-headline``) and a markdown one (``audit-report``) with the key figures and the
    commands that open the viewer and the report. Returns the report's index page."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from ableaudit.redaction import redact
    from ableaudit.report.headline_table import COLUMNS, headline_rows, unavailable_notes

    rows, notes = headline_rows(published), unavailable_notes(published)
    live = Path(published).parent.parent / Path(published).name
    source = live if live.is_file() else Path(published)
    create_table_artifact(  # an artifact is stored in Prefect's database: it passes redaction
        table=[{c: redact(v) for c, v in zip(COLUMNS, row)} for row in rows],
        key="audit-headline",
        description=redact(
            f"How often the disability-aware answer is worse, per model, arm and metric "
            f"(all pairs), from {published}."
        ),
    )
    table = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    markdown = "\n".join(
        [
            "# Does the model answer disabled people worse?",
            "",
            *(table if rows else ["No pairs were scored yet: the marts are empty."]),
            "",
            *(f"- {note}" for note in notes),
            "",
            "## Open the results",
            "",
            f"- The viewer (search, compare, rate): `ableaudit view --warehouse {source}`",
            f"- The report, a static page on the machine that ran the audit: `{index}`",
            f"- The published copy for BI and SQL: `{published}`",
        ]
    )
    create_markdown_artifact(
        markdown=redact(markdown),
        key="audit-report",
        description=redact(f"The headline of {Path(published).name} and how to open its report."),
    )
    get_run_logger().info("report: %s", index)
    return index


def resolve_config_path(config: str | Path) -> Path:
    """A config path as given, else relative to the project (deployments run from elsewhere)."""
    from ableaudit.config import resolve_config_path as resolve

    return resolve(config)
