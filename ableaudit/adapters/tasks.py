"""The Prefect tasks of the training flows (flows/train_detector.py, flows/train_dpo.py): each one step."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ableaudit.dbt.selected import build_selected
from ableaudit.warehouse.publish import publish


@task(name="dbt-build", cache_policy=NO_CACHE)
def build(warehouse: str, select: str, dbt_vars: str | None = None) -> None:
    """Load the seeds and build ``select`` (a dbt selector) with optional ``--vars``, in one
    invocation (as ``ableaudit.dbt.prompts.ensure_prompts``: dbt starts once). With
    ``dbt_vars`` the build's stamp is dropped (ableaudit.dbt.selected.build_selected)."""
    build_selected(warehouse, ["resource_type:seed", select], dbt_vars)


@task(name="train-detector", cache_policy=NO_CACHE)
def train_detector(warehouse: str, cfg: Any) -> dict[str, Any]:
    """Train, validate and register a LoRA detector; what the flow logs and returns."""
    from ableaudit.adapters.detector.train import train_detector as train

    result = train(warehouse, cfg)
    return {
        "adapter_id": result.adapter_id,
        "path": result.adapter.path,
        "summary": result.summary(),
        "metrics": {k: result.metrics[k] for k in ("target", "judge", "human")},
        "split": {k: result.split[k] for k in ("n_train", "n_test", "test_groups")},
        "snapshot": result.snapshot,
        "timings": result.timings,
    }


@task(name="run-detector", cache_policy=NO_CACHE)
def run_detector(warehouse: str, adapter_id: str) -> None:
    """Score every pair with the adapter: detector_verdicts and everything after it."""
    build_selected(warehouse, ["detector_verdicts+"], f"{{detector_adapter: '{adapter_id}'}}")


@task(name="publish", cache_policy=NO_CACHE)
def publish_copy(warehouse: str) -> dict[str, str | None]:
    """Publish for BI; a warehouse never fully built cannot be, and the reason is returned (and logged)."""
    try:
        return {"published": str(publish(warehouse)), "not_published": None}
    except RuntimeError as err:  # some marts were never built: `ableaudit build` first
        return {"published": None, "not_published": str(err)}


@task(name="export-preference-pairs", cache_policy=NO_CACHE)
def export_preference_pairs(
    warehouse: str,
    out_dir: str,
    judge: str | None,
    arms: list[str] | None,
    heldout_share: float | None,
    task: str = "text",
    image_root: str | None = None,
) -> dict[str, Any]:
    """preference_pairs in TRL's layout (train / heldout files and a manifest)."""
    from ableaudit.adapters.dpo.export import export_preference_pairs as export

    report = export(
        warehouse,
        out_dir,
        judge=judge,
        task=task,
        arms=arms,
        image_root=image_root,
        heldout_share=heldout_share,
    )
    return {
        "summary": report.summary(),
        "counts": report.counts,
        "excluded": report.excluded,
        "task": report.task,
        "train_file": str(report.train_file),
        "manifest": str(report.manifest),
    }


@task(name="train-dpo", cache_policy=NO_CACHE)
def train_dpo(warehouse: str, cfg: Any) -> dict[str, Any]:
    """Fine-tune and register a DPO LoRA; what the flow logs and returns (with the arm to audit it)."""
    from ableaudit.adapters.dpo.train import train_dpo as train

    result = train(warehouse, cfg)
    return {
        "adapter_id": result.adapter_id,
        "path": result.adapter.path,
        "base_model": result.adapter.base_model,
        "summary": result.summary(),
        "arm": result.arm_snippet(),
        "timings": result.timings,
        "metrics": {k: v for k, v in result.metrics.items() if k != "log_history"},
    }
