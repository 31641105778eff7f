"""From prompts and a config to the list of generations an audit needs.

Prompts come from the dbt model ``int_prompts``; the subset is chosen with an
ibis expression so the same selection runs on any backend ibis supports.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import ibis

from ableaudit.warehouse import ibis_compat
from ableaudit.config import Arm, AuditConfig, ConfigError, Target
from ableaudit.keys import canonical_json, content_key, model_fingerprint
from ableaudit.records import PlannedGeneration


def select_prompts(warehouse: str | Path, cfg: AuditConfig) -> list[dict[str, Any]]:
    """Read the prompts of the configured query set and subset from ``int_prompts``."""
    con = ibis_compat.connect(warehouse, read_only=True)
    try:
        if "int_prompts" not in con.list_tables():
            raise ConfigError(
                f"the warehouse {warehouse} has no int_prompts table; run `ableaudit build` "
                "(or let the audit flow prepare it) before selecting prompts"
            )
        prompts = con.table("int_prompts")
        known_sets = sorted(prompts.select("query_set").distinct().to_pyarrow()["query_set"].to_pylist())
        if cfg.query_set not in known_sets:
            raise ConfigError(
                f"query_set {cfg.query_set!r} is not in the warehouse (found: {known_sets}); "
                "load it first, e.g. `ableaudit import queries accesseval.csv --query-set accesseval`"
            )
        prompts = prompts.filter(prompts.query_set == cfg.query_set)
        sub = cfg.subset
        prompts = filter_subset(prompts, sub, "subset")
        if sub.per_domain:
            # a deterministic, seed-dependent choice of neutral queries in each domain
            neutral = prompts.filter(prompts.condition == "neutral").select("query_id", "domain")
            shuffle = (ibis.literal(str(sub.seed)) + ":" + neutral.query_id).hash()
            ranked = neutral.mutate(rank=ibis.row_number().over(group_by=neutral.domain, order_by=[shuffle, neutral.query_id]))
            chosen = ranked.filter(ranked["rank"] < sub.per_domain).select("query_id")
            prompts = prompts.semi_join(chosen, "query_id")
        rows = prompts.order_by(["domain", "query_id", "condition", "disability_id"]).to_pyarrow().to_pylist()
    finally:
        con.disconnect()
    if not rows:
        raise ConfigError(f"the subset in the config selects no prompt of query_set {cfg.query_set!r}; widen `subset:`")
    return rows


def filter_subset(prompts: ibis.Table, sub: Any, field: str) -> ibis.Table:
    """Keep the prompts of the subset's domains, queries and disabilities (the neutral prompt stays with
    its query); a value the prompts do not have is a ConfigError naming ``field`` (subset, vision.subset)."""
    for column, wanted, label in (("domain", sub.domains, "domains"), ("query_id", sub.query_ids, "query_ids"),
                                  ("disability_id", sub.disabilities, "disabilities")):
        if not wanted:
            continue
        known = set(prompts.select(column).distinct().to_pyarrow()[column].to_pylist())
        unknown = sorted(set(wanted) - known)
        if unknown:
            shown = sorted(k for k in known if k)
            raise ConfigError(f"{field}.{label} names unknown values {unknown}; known (first 20 of {len(shown)}): "
                              f"{shown[:20]}")
    if sub.domains:
        prompts = prompts.filter(prompts.domain.isin(sub.domains))
    if sub.query_ids:
        prompts = prompts.filter(prompts.query_id.isin(sub.query_ids))
    if sub.disabilities:
        prompts = prompts.filter(prompts.disability_id.isnull() | prompts.disability_id.isin(sub.disabilities))
    return prompts


@dataclass(frozen=True)
class ArmPlan:
    """What one arm asks: its name, the adapter and system prompt it runs with, and its prompts."""

    arm: str
    adapter: str | None
    system_prompt: str | None
    prompts: list[dict[str, Any]]


def expand_plan(target: Target, arm_plans: Iterable[ArmPlan], *, task: str, temperatures: Iterable[float],
                samples: int, image_root: str | Path | None = None) -> list[PlannedGeneration]:
    """Every (arm x temperature x sample x prompt), each with its key: the one place a generation's identity is built.

    The key hashes everything that determines the answer: task, backend, model
    fingerprint, adapter fingerprint, arm, prompt, system prompt, decoding,
    sample and backend options, plus the image's sha256 for a vision prompt
    (one with ``rel_path`` and ``image_sha256``; ``image_root`` is then required),
    and the model_id the row reports (a row belongs to one model in the marts).
    Not the server: replicas of one model (``base_url`` lists) share keys.
    """
    fingerprint = model_fingerprint(target.model, target.revision)
    root = str(Path(image_root).resolve()) if image_root is not None else None
    temperatures = list(temperatures)
    planned: list[PlannedGeneration] = []
    for ap in arm_plans:
        adapter_fp = model_fingerprint(ap.adapter) if ap.adapter else None
        for temperature in temperatures:
            for sample_index in range(samples):
                seed = None if target.decoding.seed is None else target.decoding.seed + sample_index
                decoding = {
                    "temperature": temperature,
                    "top_p": target.decoding.top_p,
                    "max_new_tokens": target.decoding.max_new_tokens,
                    "seed": seed,
                }
                for p in ap.prompts:
                    identity = {
                        "task": task,
                        # the name marts report: two targets of one model (or a renamed
                        # target) land rows of their own, never each other's
                        "model_id": target.reported_model_id,
                        "backend": target.backend,
                        "model": fingerprint,
                        "adapter": adapter_fp,
                        "arm": ap.arm,
                        "prompt_id": p["prompt_id"],
                        "system_prompt": ap.system_prompt,
                        "prompt_text": p["prompt_text"],
                        "decoding": decoding,
                        "sample_index": sample_index,
                        "options": target.options,
                    }
                    image: dict[str, Any] = {}
                    if p.get("image_sha256") is not None:
                        if root is None:
                            raise ValueError(f"prompt {p['prompt_id']} carries an image but no image_root was given")
                        identity["image_sha256"] = p["image_sha256"]
                        image = {"image_root": root, "image_rel_path": p["rel_path"], "image_sha256": p["image_sha256"]}
                    planned.append(PlannedGeneration(
                        generation_id=content_key(identity),
                        task=task,
                        target=target.name,
                        model_id=target.reported_model_id,
                        backend=target.backend,
                        model_revision=fingerprint,
                        adapter=ap.adapter,
                        arm=ap.arm,
                        query_set=p["query_set"],
                        query_id=p["query_id"],
                        domain=p.get("domain"),
                        disability_id=p.get("disability_id"),
                        condition=p["condition"],
                        prompt_id=p["prompt_id"],
                        system_prompt=ap.system_prompt,
                        prompt_text=p["prompt_text"],
                        temperature=temperature,
                        top_p=target.decoding.top_p,
                        max_new_tokens=target.decoding.max_new_tokens,
                        seed=seed,
                        sample_index=sample_index,
                        decoding_json=canonical_json(decoding),
                        **image,
                    ))
    return planned


def arm_system_prompt(arm: Arm, target: Target) -> str | None:
    """The arm's own system prompt, else the target's (the paper's default)."""
    return arm.system_prompt if arm.system_prompt is not None else target.system_prompt


def plan_generations(cfg: AuditConfig, target: Target, prompts: list[dict[str, Any]], task: str = "text") -> list[PlannedGeneration]:
    """Every (prompt x arm x temperature x sample) for one target, each with its key."""
    temperatures = [target.decoding.temperature] if target.decoding.temperature is not None else cfg.temperatures
    arm_plans = [ArmPlan(arm.name, arm.adapter or target.adapter, arm_system_prompt(arm, target), prompts) for arm in cfg.arms]
    return expand_plan(target, arm_plans, task=task, temperatures=temperatures, samples=cfg.samples)


def arms_by_adapter(cfg: AuditConfig, target: Target) -> dict[str | None, list[Arm]]:
    """Arms grouped by the adapter they need, so each model variant loads once."""
    groups: dict[str | None, list[Arm]] = {}
    for arm in cfg.arms:
        groups.setdefault(arm.adapter or target.adapter, []).append(arm)
    return groups


@dataclass(frozen=True)
class TargetPlan:
    """What one target must generate, grouped by the adapter each group loads."""

    target: Target
    """The target of the config."""
    groups: list[tuple[str | None, list[PlannedGeneration]]]
    """(adapter, its planned generations): each model variant loads once."""


def plan_task(cfg: AuditConfig, task: str, prompts: list[dict[str, Any]],
              image_root: str | Path | None = None) -> list[TargetPlan]:
    """Every target of ``task`` ('text' | 'vision') with its planned generations."""
    if task == "vision":
        from ableaudit.audit.vision import plan_vision_generations, vision_adapter_groups

        return [TargetPlan(target, [(adapter, plan_vision_generations(cfg, target, prompts, image_root, arms, probe))
                                    for adapter, (arms, probe) in vision_adapter_groups(cfg, target).items()])
                for target in cfg.vision_targets]
    # an arm with vision_prompt: mitigation is a vision arm; text targets skip it
    text_cfg = cfg.model_copy(update={"arms": [a for a in cfg.arms if a.vision_prompt == "neutral_disability"]})
    return [TargetPlan(target, [(adapter, plan_generations(text_cfg.model_copy(update={"arms": arms}), target, prompts))
                                for adapter, arms in arms_by_adapter(text_cfg, target).items()])
            for target in cfg.text_targets]
