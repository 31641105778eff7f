"""The `train-dpo` flow: preference_pairs -> TRL files -> DPO LoRA -> raw.adapters, ready to run as an arm.

Thin wiring over ableaudit.adapters.dpo: dbt builds preference_pairs (flagged pairs,
chosen = neutral or a faithful mitigation-arm response, split by query), the
'ok' rows are exported in TRL's conversational layout (train / heldout files
and a manifest naming the held-out queries), a peft LoRA is fine-tuned with
TRL's DPOTrainer on the train split and registered (kind 'dpo'). Re-audit the
held-out queries with the adapter as an arm to compare base, prompt
mitigation and DPO in mitigation_effect (docs/mitigation.md).

    prefect deployment run 'train-dpo/train-dpo' --param model=/models/Qwen2.5-0.5B-Instruct

Vision pairs (the VLM audit) train the audited VLM: ``task=vision`` with
``image_root`` = the audit's image_root (the export writes each pair's picture
as a path under it) and ``model`` = the VLM checkpoint::

    prefect deployment run 'train-dpo/train-dpo' --param task=vision --param image_root=/data/PAIRS/data \
        --param model=/models/llava-1.5-7b-hf
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ableaudit.audit import prefect_env

prefect_env.configure()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from ableaudit.dbt.runner import run_dbt  # noqa: E402
from ableaudit.adapters.dpo.export import export_preference_pairs  # noqa: E402
from ableaudit.adapters.dpo.train import DPOTrainConfig, train_dpo  # noqa: E402
from ableaudit.warehouse import warehouse_path  # noqa: E402


@task(name="build-preference-pairs", cache_policy=NO_CACHE)
def build_preference_pairs(warehouse: str, heldout_share: float | None) -> None:
    extra = ["--vars", f"{{preference_heldout_share: {heldout_share}}}"] if heldout_share is not None else []
    run_dbt(["seed"], warehouse)
    run_dbt(["build", "--select", "+preference_pairs", *extra], warehouse)


@task(name="export-preference-pairs", cache_policy=NO_CACHE)
def export(warehouse: str, out_dir: str, judge: str | None, arms: list[str] | None,
           heldout_share: float | None, task: str = "text", image_root: str | None = None) -> dict[str, Any]:
    report = export_preference_pairs(warehouse, out_dir, judge=judge, task=task, arms=arms, image_root=image_root,
                                     heldout_share=heldout_share)
    return {"summary": report.summary(), "counts": report.counts, "excluded": report.excluded, "task": report.task,
            "train_file": str(report.train_file), "manifest": str(report.manifest)}


@task(name="train-dpo", cache_policy=NO_CACHE)
def train(warehouse: str, cfg: DPOTrainConfig) -> dict[str, Any]:
    result = train_dpo(warehouse, cfg)
    return {"adapter_id": result.adapter_id, "path": result.adapter.path, "base_model": result.adapter.base_model,
            "summary": result.summary(), "arm": result.arm_snippet(), "timings": result.timings,
            "metrics": {k: v for k, v in result.metrics.items() if k != "log_history"}}


@flow(name="train-dpo", log_prints=True)
def train_dpo_flow(
    model: str = "builtin:smollm2",
    warehouse: str | None = None,
    data_dir: str | None = None,
    judge: str | None = None,
    arms: list[str] | None = None,
    heldout_share: float | None = None,
    name: str = "dpo",
    max_steps: int = 100,
    batch_size: int = 2,
    learning_rate: float = 5e-5,
    beta: float = 0.1,
    lora_r: int = 8,
    max_length: int = 1024,
    device: str = "auto",
    seed: int = 0,
    adapters_root: str | None = None,
    build: bool = True,
    task: str = "text",
    image_root: str | None = None,
) -> dict[str, Any]:
    """Export the flagged pairs and fine-tune a DPO LoRA on the audited model; print how to run it as an arm.

    heldout_share: var('preference_heldout_share') to build with (default: dbt_project.yml's); the export reads
    the split the build computed and fails if it was made with another share.
    task: 'text', or 'vision' for a VLM audit's pairs (then image_root, the audit's image_root, is required and
    model is the audited VLM); the default data_dir is preference_pairs/ or preference_pairs_vision/ beside the
    warehouse.
    """
    if task not in ("text", "vision"):
        raise ValueError(f"task must be 'text' or 'vision', got {task!r}")
    if task == "vision" and not image_root:
        raise ValueError("task='vision' needs image_root: the audit's image_root (the folder its images are under)")
    logger = get_run_logger()
    wh = str(warehouse_path(warehouse))
    out_dir = data_dir or str(Path(wh).parent / ("preference_pairs" if task == "text" else "preference_pairs_vision"))
    if build:
        build_preference_pairs(wh, heldout_share)
    exported = export(wh, out_dir, judge, arms, heldout_share, task, image_root)
    logger.info(exported["summary"])
    cfg = DPOTrainConfig(model=model, data=out_dir, name=name, max_steps=max_steps, batch_size=batch_size,
                         learning_rate=learning_rate, beta=beta, lora_r=lora_r, lora_alpha=2 * lora_r,
                         max_length=max_length, device=device, seed=seed, adapters_root=adapters_root)
    trained = train(wh, cfg)
    logger.info(trained["summary"])
    print(trained["arm"])
    return {"export": exported, **trained}


if __name__ == "__main__":
    train_dpo_flow()
