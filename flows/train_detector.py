"""The `train-detector` flow: judge verdicts (+ human labels) -> LoRA detector -> raw.adapters -> detector_verdicts.

The detector is trained on a split by query, validated on the held-out queries
and registered; unless build=False, dbt then scores every pair with it
(detector_verdicts and everything after it) and publishes.

    prefect deployment run 'train-detector/train-detector' --param max_steps=200
"""

from __future__ import annotations

from typing import Any

from ableaudit.audit import prefect_env

prefect_env.configure()

from prefect import flow, get_run_logger  # noqa: E402

from ableaudit.adapters import tasks  # noqa: E402
from ableaudit.adapters.detector.model import DEFAULT_BASE  # noqa: E402
from ableaudit.adapters.detector.train import DetectorTrainConfig  # noqa: E402
from ableaudit.warehouse import warehouse_path  # noqa: E402


@flow(name="train-detector", log_prints=True)
def train_detector_flow(
    warehouse: str | None = None,
    base_model: str = DEFAULT_BASE,
    judge: str | None = None,
    query_set: str | None = None,
    name: str = "detector",
    use_human: bool = True,
    test_size: float = 0.25,
    seed: int = 0,
    epochs: int = 3,
    max_steps: int | None = None,
    batch_size: int = 16,
    learning_rate: float = 5e-4,
    lora_r: int = 8,
    max_length: int = 256,
    overflow: str = "truncate",
    device: str = "auto",
    adapters_root: str | None = None,
    build: bool = True,
) -> dict[str, Any]:
    """Train, validate and register a LoRA detector; then score every pair with it (build=True)."""
    logger = get_run_logger()
    wh = str(warehouse_path(warehouse))
    cfg = DetectorTrainConfig(
        base_model=base_model,
        name=name,
        judge=judge,
        query_set=query_set,
        use_human=use_human,
        test_size=test_size,
        seed=seed,
        epochs=epochs,
        max_steps=max_steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        lora_r=lora_r,
        lora_alpha=2 * lora_r,
        max_length=max_length,
        overflow=overflow,
        device=device,
        adapters_root=adapters_root,
    )
    tasks.build(wh, "+int_pair_judgments")
    out = tasks.train_detector(wh, cfg)
    logger.info(out["summary"])
    if build:
        tasks.run_detector(wh, out["adapter_id"])
        out.update(tasks.publish_copy(wh))
        logger.info(
            "detector_verdicts built with %s; %s",
            out["adapter_id"],
            f"published {out['published']}"
            if out["published"]
            else f"not published: {out['not_published']}",
        )
    return out


if __name__ == "__main__":
    train_detector_flow()
