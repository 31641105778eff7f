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
from prefect.exceptions import TerminationSignal  # noqa: E402

from ableaudit import (
    redaction,  # noqa: E402
    stopping,  # noqa: E402
)
from ableaudit.adapters.dpo.unseen import refuse_trained_images  # noqa: E402
from ableaudit.audit import alerts, runners, tasks  # noqa: E402
from ableaudit.audit.planning import (  # noqa: E402
    audit_task,
    imported_units,
    plan_task,
    refuse_imported_units,
)
from ableaudit.audit.runs import (  # noqa: E402
    AuditIncomplete,
    AuditInterrupted,
    finish_run,
    run_failures,
    start_run,
)
from ableaudit.backends.base import GenerationCancelled  # noqa: E402
from ableaudit.config import AuditConfig, load_config  # noqa: E402
from ableaudit.gates import GateBlocked, evaluate, load_gates  # noqa: E402
from ableaudit.warehouse import warehouse_path  # noqa: E402
from ableaudit.warehouse.connection import connect  # noqa: E402
from ableaudit.warehouse.landing import landed_keys  # noqa: E402
from ableaudit.warehouse.publish import parquet_folder  # noqa: E402


def audit_targets(
    wh: str,
    cfg: AuditConfig,
    kind: str,
    image_root: str | None,
    run_id: str,
    planned: list[str],
    first_look: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Every target of task ``kind``, ``parallel_targets`` at once on the config's task runner
    (threads here by default; a Dask or Ray cluster with ``task_runner:``, the flow landing
    what the workers return: ``ableaudit.audit.runners``).

    Plans are task inputs, never flow parameters (the Prefect server refuses a
    flow run's parameters over 512 KiB, which an audit's plan passes). A failing
    target stops no other: each runs to its end (what it landed stays landed),
    then the flow fails naming each failed target.
    """
    prompts = tasks.prepare_prompts(wh, cfg, kind)
    if first_look is not None:
        prompts = first_look_prompts(prompts, first_look)
    get_run_logger().info("audit %s: %d %s prompts", cfg.name, len(prompts), kind)
    plans = plan_task(cfg, kind, prompts, image_root, run_id)
    refuse_imported_units(plans, imported_units(wh, plans))
    refuse_trained_images(wh, plans)
    planned += [g.generation_id for p in plans for _, group in p.groups for g in group]
    stopping.check()
    if runners.lands_in_flow(cfg.task_runner):
        totals, failed = runners.fan_out(
            wh,
            plans,
            run_id,
            cfg.task_runner,
            cfg.parallel_targets,
            lambda runner, params: runner.submit(tasks.generate_chunk, params),
            get_run_logger().info,
        )
        for name, total in totals.items():
            get_run_logger().info("target %s: %s", name, json.dumps(total))
    else:
        totals, failed = _on_threads(wh, cfg, plans, run_id)
    stopping.check()
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {len(plans)} targets failed (the others' generations are landed; "
            "a re-run generates only what is missing): " + "; ".join(failed)
        )
    return totals


def first_look_prompts(prompts: list[dict[str, Any]], look: dict[str, int]) -> list[dict[str, Any]]:
    """The prompts of a first look at ``look["queries"]`` neutral queries: the first query of
    each domain, domains in order. Every one is a prompt of the whole audit, which then asks
    only for the rest. Sets ``look["of"]``, the whole audit's neutral queries."""
    first: dict[str, str] = {}
    for row in prompts:
        first.setdefault(row["domain"], row["query_id"])
    chosen = {first[d] for d in sorted(first)[: look["queries"]]}
    look["of"] = len({row["query_id"] for row in prompts})
    look["queries"] = len(chosen)
    return [row for row in prompts if row["query_id"] in chosen]


def judges_on_cluster(wh: str, cfg: AuditConfig, run_id: str) -> dict[str, Any]:
    """The judge step on the config's cluster: each judge's verdicts still to obtain, in
    ``judge-chunk`` tasks on the workers, ``parallel_targets`` judges at once, the flow landing
    what they return (``runners.fan_out_judges``). Fails naming each failed judge, after the
    others finished."""
    from ableaudit.judges.runner import run_judges

    failed: list[str] = []

    def on_cluster(jobs: list) -> None:
        failed.extend(
            runners.fan_out_judges(
                wh,
                jobs,
                run_id,
                cfg.task_runner,
                cfg.parallel_targets,
                lambda runner, params: runner.submit(tasks.judge_chunk, params),
                get_run_logger().info,
            )
        )

    counts = run_judges(wh, cfg, run_id, on_cluster=on_cluster)
    stopping.check()
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {len(cfg.judges)} judges failed (the verdicts that came back are "
            "landed; a re-run asks only for what is missing): " + "; ".join(failed)
        )
    return counts


@flow(name="judge", log_prints=True)
def judge_on_cluster(config: str, warehouse: str, run_id: str) -> dict[str, Any]:
    """The config's judges alone, on what has landed, on the config's cluster (``task_runner:
    dask | ray``): what ``ableaudit judge`` runs for such a config. {judge: {kind: counts}},
    the judges of vision pairs as ``"<judge> (vision)"``."""
    from ableaudit.judges.runner import with_vision_judges

    cfg = load_config(config)
    return with_vision_judges(cfg, lambda scoped: judges_on_cluster(warehouse, scoped, run_id))


def _on_threads(
    wh: str, cfg: AuditConfig, plans: list, run_id: str
) -> tuple[dict[str, Any], list[str]]:
    """Each target one ``audit-target`` task on a thread of this process, landing its own rows."""
    with runners.make_task_runner(cfg.task_runner, cfg.parallel_targets) as runner:
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
    return totals, failed


@flow(name="audit", log_prints=True)
def audit(
    config: str = "configs/default.yaml",
    warehouse: str | None = None,
    build: bool | None = None,
    first_look: int | None = None,
) -> dict[str, Any]:
    """Audit every target of the config on the selected prompts; land, judge, build, publish.

    Requests that failed (error rows of this run) fail the flow after the build, so what
    succeeded is published and a scheduler still sees the run as failed
    (``AuditIncomplete``, naming the kinds of error and how to retry). The first Ctrl-C or
    SIGTERM stops it once the answers that finished have landed (``AuditInterrupted``; the
    run is 'interrupted'); see ``ableaudit.stopping``. The run ends (its status
    written) before the build, which is `ableaudit build`'s (``ableaudit.build``): its stamp
    lets the next `ableaudit build` skip. The last log lines say where the warehouse, the
    published copy, its Parquet folder and the report are.

    ``first_look``: only that many neutral queries of the text targets (the first of each
    domain), without gates or alerts: a first result before the whole audit (``ableaudit
    audit --first-look``). The summary's ``first_look`` says how many of how many.
    """
    config_path = tasks.resolve_config_path(config)
    redaction.install_log_redaction()  # a flow run a worker started passes no command line
    cfg = load_config(config_path)
    look = None
    if first_look:
        look = {"queries": first_look}
        cfg = cfg.model_copy(update={"targets": cfg.text_targets, "alerts": None, "gates": None})
    gates = cfg.gates_path(config_path)
    if gates is not None:
        load_gates(gates)  # a mistake in the gates file stops the audit before it starts
    wh = str(warehouse_path(warehouse))
    run_id = _run_id()
    stopping.reset()
    start_run(wh, run_id, cfg)
    summary: dict[str, Any] = {"run_id": run_id, "warehouse": wh, "targets": {}}
    if look is not None:
        summary["first_look"] = look
    status = "failed"
    finished = False
    logger = get_run_logger()
    step, planned = "preparation", []
    try:
        with stopping.stop_on_signals(logger.warning):
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
                step = "generation"
                summary["targets"].update(
                    audit_targets(wh, cfg, kind, image_root, run_id, planned, look)
                )
            for kind in kinds if cfg.judges else []:
                step = "judges"
                stopping.check()
                # the contrastive judge compares each image's two descriptions (text only: it never sees the image)
                scoped = cfg.model_copy(update={"query_set": audit_task(cfg, kind).query_set})
                key = "judges" if kind == "text" else "vision_judges"
                try:
                    if runners.lands_in_flow(cfg.task_runner):
                        summary[key] = judges_on_cluster(wh, scoped, run_id)
                    else:
                        summary[key] = tasks.judge(wh, scoped, run_id)
                except GenerationCancelled:
                    stopping.check()
                    raise
            if cfg.build if build is None else build:
                step = "build"
                stopping.check()
                # the run ends before its build, which reads it as it stays: the build's
                # stamp then holds until something else changes (docs/incremental.md)
                status = "failed" if run_failures(wh, run_id) else "completed"
                finish_run(wh, run_id, status)
                finished = True
                built = tasks.build_warehouse(wh, str(gates) if gates else None)
                summary["published"] = built["published"]
                summary["report"] = tasks.link_report(built["report"], built["published"])
                if gates is not None:
                    summary["gate_blocking"] = tasks.release_gate(wh)
            summary["alert"] = alerts.after_audit(wh, run_id, cfg, summary)
        failures = run_failures(wh, run_id)
        if failures:
            raise AuditIncomplete(failures)
        status = "completed"
        if summary.get("gate_blocking"):
            raise GateBlocked(evaluate(wh))
    except stopping.Interrupted as stop:
        status = "interrupted"
        left = len(planned) - len(landed_keys(wh, planned))
        raise AuditInterrupted(
            stop.signum, step, _landed_by(wh, run_id), left, len(planned)
        ) from None
    except (KeyboardInterrupt, SystemExit, TerminationSignal):
        # a signal before the audit took them over, or Prefect cancelling the run
        status = "interrupted"
        raise
    finally:
        if not finished:
            finish_run(wh, run_id, status)
        _log_results(summary, status)
    return summary


def _landed_by(wh: str, run_id: str) -> int:
    con = connect(wh, read_only=True)
    try:
        return con.execute(
            "select count(*) from raw.generations where run_id = ?", [run_id]
        ).fetchone()[0]
    finally:
        con.close()


def result_paths(warehouse: str, published: str | None, report: str | None) -> dict[str, str]:
    """Where an audit's results are, by name, as the flow's last log lines and the CLI say it."""
    paths = {"warehouse": warehouse}
    if published:
        paths["published copy"] = published
        paths["Parquet folder"] = str(parquet_folder(published))
    else:
        paths["published copy"] = "not rebuilt by this run (`ableaudit build` writes it)"
        paths["Parquet folder"] = "not rebuilt by this run"
    paths["report"] = report or "not rendered by this run"
    return paths


def _log_results(summary: dict[str, Any], status: str) -> None:
    """The flow's last lines: the run's outcome and where each result is."""
    logger = get_run_logger()
    logger.info("audit run %s %s", summary["run_id"], status)
    paths = result_paths(summary["warehouse"], summary.get("published"), summary.get("report"))
    for name, path in paths.items():
        logger.info("results: %s: %s", name, path)


def _run_id() -> str:
    try:
        return str(get_run_context().flow_run.id)
    except Exception:  # called outside a flow run (tests of the wiring)
        return str(uuid.uuid4())
