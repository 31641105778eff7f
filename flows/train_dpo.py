"""The `train-dpo` flow: preference_pairs -> TRL files -> DPO LoRA -> raw.adapters, ready to run as an arm.

    prefect deployment run 'train-dpo/train-dpo' --param model=/models/Qwen2.5-0.5B-Instruct
    prefect deployment run 'train-dpo/train-dpo' --param task=vision --param image_root=/data/PAIRS/data \
        --param model=/models/llava-1.5-7b-hf

Re-audit the held-out queries with the adapter as an arm to compare base, prompt
mitigation and DPO in mitigation_effect (docs/mitigation.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ableaudit.audit import prefect_env

prefect_env.configure()

from prefect import flow, get_run_logger  # noqa: E402

from ableaudit.adapters import tasks  # noqa: E402
from ableaudit.adapters.dpo.train import DPOTrainConfig  # noqa: E402
from ableaudit.warehouse import warehouse_path  # noqa: E402


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

    heldout_share: var('preference_heldout_share') to build with; the export fails if the split was made with
    another. task 'vision' trains the audited VLM on a VLM audit's pairs and needs the audit's image_root.
    """
    if task not in ("text", "vision"):
        raise ValueError(f"task must be 'text' or 'vision', got {task!r}")
    if task == "vision" and not image_root:
        raise ValueError(
            "task='vision' needs image_root: the audit's image_root (the folder its images are under)"
        )
    wh = str(warehouse_path(warehouse))
    out_dir = data_dir or str(
        Path(wh).parent / ("preference_pairs" if task == "text" else "preference_pairs_vision")
    )
    if build:
        share = (
            f"{{preference_heldout_share: {heldout_share}}}" if heldout_share is not None else None
        )
        tasks.build(wh, "+preference_pairs", share)
    exported = tasks.export_preference_pairs(
        wh, out_dir, judge, arms, heldout_share, task, image_root
    )
    get_run_logger().info(exported["summary"])
    cfg = DPOTrainConfig(
        model=model,
        data=out_dir,
        name=name,
        max_steps=max_steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        beta=beta,
        lora_r=lora_r,
        lora_alpha=2 * lora_r,
        max_length=max_length,
        device=device,
        seed=seed,
        adapters_root=adapters_root,
    )
    trained = tasks.train_dpo(wh, cfg)
    get_run_logger().info(trained["summary"])
    print(trained["arm"])
    return {"export": exported, **trained}


if __name__ == "__main__":
    train_dpo_flow()
