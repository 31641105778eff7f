"""The `audit` flow: prompts -> generations -> raw.generations -> dbt build -> publish.

Text targets answer the prompts of int_prompts; vision targets (task: vision)
describe the images of the config's image set (landed in raw.images first)
under the prompts of int_vision_prompts. Both land in raw.generations and
meet in the same marts.

Thin wiring: every step is a function of the `ableaudit` package. Tasks do the
I/O and compute; each opens its own DuckDB connection; all writes to
raw.generations go through `land` (ableaudit.landing).

Run it as a deployment (`prefect deployment run audit/audit`, see prefect.yaml)
or directly (`ableaudit audit --config configs/default.yaml`).
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

from ableaudit import prefect_env

prefect_env.configure()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.context import get_run_context  # noqa: E402
from tqdm import tqdm  # noqa: E402

from ableaudit import PROJECT_ROOT  # noqa: E402
from ableaudit.backends import make_backend  # noqa: E402
from ableaudit.backends.base import requests_per_call, results_in_batches  # noqa: E402
from ableaudit.config import AuditConfig, load_config  # noqa: E402
from ableaudit.dbt_runner import run_dbt  # noqa: E402
from ableaudit.images import land_images, load_image_set  # noqa: E402
from ableaudit.judges.runner import progress_bars, run_judges  # noqa: E402
from ableaudit.landing import LandingReport, land_generations, landed_keys, result_row  # noqa: E402
from ableaudit.planning import PlannedGeneration, arms_by_adapter, plan_generations, select_prompts  # noqa: E402
from ableaudit.publish import publish  # noqa: E402
from ableaudit.runs import finish_run, start_run  # noqa: E402
from ableaudit.vision import (  # noqa: E402
    effective_image_root,
    plan_vision_generations,
    resolve_manifest,
    select_vision_prompts,
    vision_adapter_groups,
)
from ableaudit.warehouse import warehouse_path  # noqa: E402


@task(name="prepare-prompts", cache_policy=NO_CACHE)
def prepare_prompts(warehouse: str) -> None:
    """Seeds and int_prompts must exist before prompts can be selected."""
    run_dbt(["seed"], warehouse)
    run_dbt(["build", "--select", "+int_prompts"], warehouse)


@task(name="select-prompts", cache_policy=NO_CACHE)
def select(warehouse: str, cfg: AuditConfig) -> list[dict[str, Any]]:
    return select_prompts(warehouse, cfg)


@task(name="load-images", cache_policy=NO_CACHE)
def load_images(warehouse: str, cfg: AuditConfig) -> dict[str, Any]:
    """Land the audit's image set in raw.images (idempotent: unchanged files change nothing)."""
    loaded = load_image_set(cfg.image_set, effective_image_root(cfg), resolve_manifest(cfg))
    report = land_images(warehouse, loaded)
    return {"images": len(loaded.records), "summary": loaded.summary(), **report.as_dict()}


@task(name="prepare-vision-prompts", cache_policy=NO_CACHE)
def prepare_vision_prompts(warehouse: str) -> None:
    run_dbt(["seed"], warehouse)
    run_dbt(["build", "--select", "+int_vision_prompts"], warehouse)


@task(name="select-vision-prompts", cache_policy=NO_CACHE)
def select_vision(warehouse: str, cfg: AuditConfig) -> list[dict[str, Any]]:
    return select_vision_prompts(warehouse, cfg)


@task(name="pending", cache_policy=NO_CACHE)
def pending(warehouse: str, planned: list[PlannedGeneration]) -> list[PlannedGeneration]:
    """What is not landed yet: a resumed audit skips every landed result."""
    done = landed_keys(warehouse, [p.generation_id for p in planned])
    return [p for p in planned if p.generation_id not in done]


@task(name="generate", cache_policy=NO_CACHE)
def generate(wh: str, backend: Any, target: Any, todo: list[PlannedGeneration], run_id: str) -> LandingReport:
    """Generate ``todo``, landing results in batches as they come back: a kill loses only what was in flight."""
    logger = get_run_logger()
    plans = {p.generation_id: p for p in todo}
    total = LandingReport()
    done = 0
    size = requests_per_call(backend, target.batch_size)
    with tqdm(total=len(todo), desc=f"{target.name}", unit="gen") as bar:
        for results in results_in_batches(backend, [p.request() for p in todo], size):
            total += land(wh, [result_row(plans[r.key], r, run_id) for r in results])
            done += len(results)
            bar.update(len(results))
            logger.info("%s: %d/%d landed", target.name, done, len(todo))
    return total


@task(name="land", cache_policy=NO_CACHE)
def land(warehouse: str, rows: list[dict[str, Any]]) -> LandingReport:
    return land_generations(warehouse, rows)


@task(name="judge", cache_policy=NO_CACHE)
def judge(warehouse: str, cfg: AuditConfig, run_id: str) -> dict[str, Any]:
    """Every judge of the config on every landed subject; cached verdicts cost nothing."""
    with progress_bars(get_run_logger().info) as progress:
        return run_judges(warehouse, cfg, run_id, progress=progress)


@task(name="build-warehouse", cache_policy=NO_CACHE)
def build_warehouse(warehouse: str) -> str:
    run_dbt(["seed"], warehouse)
    run_dbt(["build"], warehouse)
    return str(publish(warehouse))


def _run_id() -> str:
    try:
        return str(get_run_context().flow_run.id)
    except Exception:  # called outside a flow run (tests of the wiring)
        return str(uuid.uuid4())


def _generate_target(wh: str, target: Any, groups: list[tuple[str | None, list[PlannedGeneration]]], run_id: str,
                     logger: Any) -> LandingReport:
    """Generate and land what is not landed yet, one backend per adapter group (each model variant loads once)."""
    total = LandingReport()
    for adapter, planned in groups:
        todo = pending(wh, planned)
        logger.info(
            "target %s (adapter %s): %d planned, %d landed already, %d to generate",
            target.name, adapter, len(planned), len(planned) - len(todo), len(todo),
        )
        if not todo:
            continue
        backend = make_backend(target, adapter=adapter)
        try:
            total += generate(wh, backend, target, todo, run_id)
        finally:
            backend.close()
    return total


@task(name="audit-target", cache_policy=NO_CACHE)
def audit_target(wh: str, target: Any, groups: list[tuple[str | None, list[PlannedGeneration]]], run_id: str,
                 gate: threading.Semaphore) -> dict[str, int]:
    """One target's generations, run beside other targets (``parallel_targets``); ``gate`` bounds how many at once."""
    with gate:
        return _generate_target(wh, target, groups, run_id, get_run_logger()).__dict__


def _generate_targets(wh: str, jobs: list[tuple[Any, list]], run_id: str, parallel: int, logger: Any) -> dict[str, Any]:
    """Every target's generations, one after another or ``parallel`` at a time.

    In parallel, a failing target does not stop the others: every target runs to
    its end (what it landed stays landed), then the flow fails naming each failed
    target.
    """
    totals: dict[str, Any] = {}
    if parallel <= 1 or len(jobs) <= 1:
        for target, groups in jobs:
            totals[target.name] = _generate_target(wh, target, groups, run_id, logger).__dict__
            logger.info("target %s: %s", target.name, json.dumps(totals[target.name]))
        return totals
    gate = threading.BoundedSemaphore(parallel)
    logger.info("%d targets, %d at a time", len(jobs), parallel)
    futures = [(target, audit_target.submit(wh, target, groups, run_id, gate)) for target, groups in jobs]
    failed: list[str] = []
    for target, future in futures:
        try:
            totals[target.name] = future.result()
            logger.info("target %s: %s", target.name, json.dumps(totals[target.name]))
        except Exception as err:
            failed.append(f"{target.name}: {err}")
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(jobs)} targets failed (the others' generations are landed; "
                           "a re-run generates only what is missing): " + "; ".join(failed))
    return totals


@flow(name="audit", log_prints=True)
def audit(config: str = "configs/default.yaml", warehouse: str | None = None, build: bool | None = None) -> dict[str, Any]:
    """Audit every target of the config on the selected prompts; land, build, publish."""
    logger = get_run_logger()
    config_path = Path(config)
    if not config_path.is_absolute() and not config_path.exists():
        config_path = PROJECT_ROOT / config_path
    cfg = load_config(config_path)
    wh = str(warehouse_path(warehouse))
    run_id = _run_id()
    start_run(wh, run_id, cfg)
    summary: dict[str, Any] = {"run_id": run_id, "warehouse": wh, "targets": {}}
    status = "failed"
    try:
        if cfg.text_targets:
            prepare_prompts(wh)
            prompts = select(wh, cfg)
            logger.info("audit %s: %d prompts of query set %r", cfg.name, len(prompts), cfg.query_set)
            # an arm with vision_prompt: mitigation is a vision arm; text targets skip it
            text_arms = [a for a in cfg.arms if a.vision_prompt == "neutral_disability"]
            text_cfg = cfg.model_copy(update={"arms": text_arms})
            jobs = [(target, [(adapter, plan_generations(text_cfg.model_copy(update={"arms": arms}), target, prompts))
                              for adapter, arms in arms_by_adapter(text_cfg, target).items()])
                    for target in cfg.text_targets]
            summary["targets"].update(_generate_targets(wh, jobs, run_id, cfg.parallel_targets, logger))
        if cfg.vision_targets:
            summary["images"] = load_images(wh, cfg)
            logger.info("images: %s", json.dumps(summary["images"]))
            prepare_vision_prompts(wh)
            vprompts = select_vision(wh, cfg)
            logger.info("audit %s: %d image prompts of image set %r", cfg.name, len(vprompts), cfg.image_set)
            root = effective_image_root(cfg)
            jobs = [(target, [(adapter, plan_vision_generations(cfg, target, vprompts, root, arms, probe))
                              for adapter, (arms, probe) in vision_adapter_groups(cfg, target).items()])
                    for target in cfg.vision_targets]
            summary["targets"].update(_generate_targets(wh, jobs, run_id, cfg.parallel_targets, logger))
        if cfg.judges and cfg.text_targets:
            summary["judges"] = judge(wh, cfg, run_id)
            logger.info("judges: %s", json.dumps(summary["judges"]))
        if cfg.judges and cfg.vision_targets:
            # the contrastive judge compares each image's two descriptions (text only: it never sees the image)
            summary["vision_judges"] = judge(wh, cfg.model_copy(update={"query_set": cfg.image_set}), run_id)
            logger.info("vision judges: %s", json.dumps(summary["vision_judges"]))
        do_build = cfg.build if build is None else build
        if do_build:
            summary["published"] = build_warehouse(wh)
        status = "completed"
    finally:
        finish_run(wh, run_id, status)
    return summary


if __name__ == "__main__":
    audit()
