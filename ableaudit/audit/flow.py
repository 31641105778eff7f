"""The `audit` flow: prompts -> generations -> raw.generations -> judges -> dbt build -> publish -> report.

Text targets answer the prompts of int_prompts; vision targets describe the
images of the config's image set under the prompts of int_vision_prompts. Both
land in raw.generations and meet in the same marts. Every step is a task of
``ableaudit.audit.tasks``; this module only wires them.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ableaudit.audit import prefect_env

prefect_env.configure()

from prefect import flow, get_run_logger  # noqa: E402
from prefect.context import get_run_context  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from ableaudit.audit import alerts, tasks  # noqa: E402
from ableaudit.audit.planning import audit_task, plan_task  # noqa: E402
from ableaudit.audit.runs import (  # noqa: E402
    AuditIncomplete,
    finish_run,
    run_failures,
    start_run,
)
from ableaudit.config import AuditConfig, load_config  # noqa: E402
from ableaudit.gates import GateBlocked, evaluate, load_gates  # noqa: E402
from ableaudit.warehouse import warehouse_path  # noqa: E402


def audit_targets(
    wh: str, cfg: AuditConfig, kind: str, image_root: str | None, run_id: str
) -> dict[str, Any]:
    """Every target of task ``kind``, ``parallel_targets`` at once on a thread-pool task runner.

    Plans are task inputs, never flow parameters (the Prefect server refuses a
    flow run's parameters over 512 KiB, which an audit's plan passes). A failing
    target stops no other: each runs to its end (what it landed stays landed),
    then the flow fails naming each failed target.
    """
    prompts = tasks.prepare_prompts(wh, cfg, kind)
    get_run_logger().info("audit %s: %d %s prompts", cfg.name, len(prompts), kind)
    plans = plan_task(cfg, kind, prompts, image_root, run_id)
    with ThreadPoolTaskRunner(max_workers=cfg.parallel_targets) as runner:
        futures = [
            (
                p.target.name,
                runner.submit(tasks.audit_target, {"wh": wh, "plan": p, "run_id": run_id}),
            )
            for p in plans
        ]
        totals, failed = {}, []
        for name, future in futures:
            try:
                totals[name] = future.result()
                get_run_logger().info("target %s: %s", name, json.dumps(totals[name]))
            except Exception as err:
                failed.append(f"{name}: {err}")
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {len(plans)} targets failed (the others' generations are landed; "
            "a re-run generates only what is missing): " + "; ".join(failed)
        )
    return totals


@flow(name="audit", log_prints=True)
def audit(
    config: str = "configs/default.yaml", warehouse: str | None = None, build: bool | None = None
) -> dict[str, Any]:
    """Audit every target of the config on the selected prompts; land, judge, build, publish.

    Requests that failed (error rows of this run) fail the flow after the build, so what
    succeeded is published and a scheduler still sees the run as failed
    (``AuditIncomplete``, naming the kinds of error and how to retry).
    """
    config_path = tasks.resolve_config_path(config)
    cfg = load_config(config_path)
    gates = cfg.gates_path(config_path)
    if gates is not None:
        load_gates(gates)  # a mistake in the gates file stops the audit before it starts
    wh = str(warehouse_path(warehouse))
    run_id = _run_id()
    start_run(wh, run_id, cfg)
    summary: dict[str, Any] = {"run_id": run_id, "warehouse": wh, "targets": {}}
    status = "failed"
    try:
        kinds = [
            k
            for k, targets in (("text", cfg.text_targets), ("vision", cfg.vision_targets))
            if targets
        ]
        for kind in kinds:
            image_root = None
            if kind == "vision":
                summary["images"] = tasks.load_images(wh, cfg)
                image_root = str(cfg.vision.images_folder())
            summary["targets"].update(audit_targets(wh, cfg, kind, image_root, run_id))
        for kind in kinds if cfg.judges else []:
            # the contrastive judge compares each image's two descriptions (text only: it never sees the image)
            scoped = cfg.model_copy(update={"query_set": audit_task(cfg, kind).query_set})
            summary["judges" if kind == "text" else "vision_judges"] = tasks.judge(
                wh, scoped, run_id
            )
        if cfg.build if build is None else build:
            summary["published"] = tasks.build_warehouse(wh, str(gates) if gates else None)
            summary["report"] = tasks.render_report(summary["published"])
            if gates is not None:
                summary["gate_blocking"] = tasks.release_gate(wh)
        get_run_logger().info(
            "results: warehouse %s; published copy %s; report %s",
            wh,
            summary.get("published", "(not built)"),
            summary.get("report", "(not built)"),
        )
        summary["alert"] = alerts.after_audit(wh, run_id, cfg, summary)
        failures = run_failures(wh, run_id)
        if failures:
            raise AuditIncomplete(failures)
        status = "completed"
        if summary.get("gate_blocking"):
            raise GateBlocked(evaluate(wh))
    except (KeyboardInterrupt, SystemExit):
        status = "interrupted"
        raise
    finally:
        finish_run(wh, run_id, status)
    return summary


def _run_id() -> str:
    try:
        return str(get_run_context().flow_run.id)
    except Exception:  # called outside a flow run (tests of the wiring)
        return str(uuid.uuid4())
