"""The `train-detector` flow: judge verdicts (+ human labels) -> LoRA detector -> raw.adapters -> detector_verdicts.

Thin wiring over ableaudit.adapters.detector: the warehouse is built up to the judged
pairs, the detector is trained on a split by query and validated on the
held-out queries, registered with its base, data snapshot, split and metrics,
and (unless build=False) dbt builds detector_verdicts and everything after it
(int_ratings -> agreement: detector_vs_judge and human_vs_detector rows), then
publishes (a warehouse whose other marts were never built is not published; the
flow says so: run `ableaudit build`).

    prefect deployment run 'train-detector/train-detector' --param max_steps=200
    python flows/train_detector.py                  # the same, directly, on the default warehouse
"""

from __future__ import annotations

from typing import Any

from ableaudit.audit import prefect_env

prefect_env.configure()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from ableaudit.dbt.runner import run_dbt  # noqa: E402
from ableaudit.adapters.detector.model import DEFAULT_BASE  # noqa: E402
from ableaudit.adapters.detector.train import DetectorTrainConfig, train_detector  # noqa: E402
from ableaudit.warehouse.publish import publish  # noqa: E402
from ableaudit.warehouse import warehouse_path  # noqa: E402


@task(name="prepare-judged-pairs", cache_policy=NO_CACHE)
def prepare(warehouse: str) -> None:
    """int_pairs and int_pair_judgments must reflect every landed verdict."""
    run_dbt(["seed"], warehouse)
    run_dbt(["build", "--select", "+int_pair_judgments"], warehouse)


@task(name="train-detector", cache_policy=NO_CACHE)
def train(warehouse: str, cfg: DetectorTrainConfig) -> dict[str, Any]:
    result = train_detector(warehouse, cfg)
    return {"adapter_id": result.adapter_id, "path": result.adapter.path, "summary": result.summary(),
            "metrics": {k: result.metrics[k] for k in ("target", "judge", "human")},
            "split": {k: result.split[k] for k in ("n_train", "n_test", "test_groups")},
            "snapshot": result.snapshot, "timings": result.timings}


@task(name="run-detector", cache_policy=NO_CACHE)
def run_detector(warehouse: str, adapter_id: str) -> None:
    run_dbt(["build", "--select", "detector_verdicts+", "--vars", f"{{detector_adapter: '{adapter_id}'}}"], warehouse)


@task(name="publish", cache_policy=NO_CACHE)
def publish_copy(warehouse: str) -> dict[str, str | None]:
    """Publish for BI; a warehouse never fully built cannot be, and the reason is returned (and logged)."""
    try:
        return {"published": str(publish(warehouse)), "not_published": None}
    except RuntimeError as err:  # some marts were never built: `ableaudit build` first
        return {"published": None, "not_published": str(err)}


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
    cfg = DetectorTrainConfig(base_model=base_model, name=name, judge=judge, query_set=query_set, use_human=use_human,
                              test_size=test_size, seed=seed, epochs=epochs, max_steps=max_steps,
                              batch_size=batch_size, learning_rate=learning_rate, lora_r=lora_r, lora_alpha=2 * lora_r,
                              max_length=max_length, overflow=overflow, device=device, adapters_root=adapters_root)
    prepare(wh)
    out = train(wh, cfg)
    logger.info(out["summary"])
    if build:
        run_detector(wh, out["adapter_id"])
        logger.info("detector_verdicts built with %s; int_ratings and agreement refreshed", out["adapter_id"])
        out.update(publish_copy(wh))
        if out["not_published"]:
            logger.warning("not published: %s", out["not_published"])
        else:
            logger.info("published %s", out["published"])
    return out


if __name__ == "__main__":
    train_detector_flow()
