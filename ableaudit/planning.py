"""From prompts and a config to the list of generations an audit needs.

Prompts come from the dbt model ``int_prompts``; the subset is chosen with an
ibis expression so the same selection runs on any backend ibis supports.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import ibis

from ableaudit import ibis_compat
from ableaudit.backends.base import GenerationRequest
from ableaudit.config import Arm, AuditConfig, ConfigError, Target
from ableaudit.keys import canonical_json, content_key, model_fingerprint


@dataclass(frozen=True)
class PlannedGeneration:
    """One row of raw.generations before the model has answered."""

    generation_id: str
    task: str
    target: str
    model_id: str
    backend: str
    model_revision: str
    adapter: str | None
    arm: str
    query_set: str
    query_id: str
    domain: str | None
    disability_id: str | None
    condition: str
    prompt_id: str
    system_prompt: str
    prompt_text: str
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int | None
    sample_index: int
    decoding_json: str
    # Vision generations: the image sent beside the prompt (read at request time,
    # checked against its sha256). Not landed: prompt_id and the key name it.
    image_root: str | None = None
    image_rel_path: str | None = None
    image_sha256: str | None = None

    def request(self) -> GenerationRequest:
        messages: tuple[dict, ...] = ({"role": "user", "content": self.prompt_text},)
        if self.system_prompt:
            messages = ({"role": "system", "content": self.system_prompt},) + messages
        images: tuple[bytes, ...] = ()
        if self.image_rel_path is not None:
            from ableaudit.images import read_image_bytes

            images = (read_image_bytes(self.image_root or ".", self.image_rel_path, self.image_sha256),)
        return GenerationRequest(
            key=self.generation_id,
            messages=messages,
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
            images=images,
        )

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


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
        _check_known(prompts, "domain", sub.domains)
        _check_known(prompts, "query_id", sub.query_ids)
        _check_known(prompts, "disability_id", sub.disabilities)
        if sub.domains:
            prompts = prompts.filter(prompts.domain.isin(sub.domains))
        if sub.query_ids:
            prompts = prompts.filter(prompts.query_id.isin(sub.query_ids))
        if sub.disabilities:
            prompts = prompts.filter(prompts.disability_id.isnull() | prompts.disability_id.isin(sub.disabilities))
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


def _check_known(prompts: ibis.Table, column: str, wanted: Iterable[str]) -> None:
    wanted = list(wanted)
    if not wanted:
        return
    known = set(prompts.select(column).distinct().to_pyarrow()[column].to_pylist())
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise ConfigError(f"subset.{column if column != 'disability_id' else 'disabilities'} names unknown values {unknown}; known: {sorted(k for k in known if k)}")


def plan_generations(cfg: AuditConfig, target: Target, prompts: list[dict[str, Any]], task: str = "text") -> list[PlannedGeneration]:
    """Every (prompt x arm x temperature x sample) for one target, each with its key."""
    planned = []
    for arm in cfg.arms:
        adapter = arm.adapter or target.adapter
        fingerprint = model_fingerprint(target.model, target.revision)
        adapter_fp = model_fingerprint(adapter) if adapter else None
        system_prompt = arm.system_prompt if arm.system_prompt is not None else target.system_prompt
        temperatures = [target.decoding.temperature] if target.decoding.temperature is not None else cfg.temperatures
        for temperature in temperatures:
            for sample_index in range(cfg.samples):
                seed = None if target.decoding.seed is None else target.decoding.seed + sample_index
                decoding = {
                    "temperature": temperature,
                    "top_p": target.decoding.top_p,
                    "max_new_tokens": target.decoding.max_new_tokens,
                    "seed": seed,
                }
                for p in prompts:
                    identity = {
                        "task": task,
                        "backend": target.backend,
                        "model": fingerprint,
                        "adapter": adapter_fp,
                        "arm": arm.name,
                        "prompt_id": p["prompt_id"],
                        "system_prompt": system_prompt,
                        "prompt_text": p["prompt_text"],
                        "decoding": decoding,
                        "sample_index": sample_index,
                        "options": target.options,
                    }
                    planned.append(
                        PlannedGeneration(
                            generation_id=content_key(identity),
                            task=task,
                            target=target.name,
                            model_id=target.reported_model_id,
                            backend=target.backend,
                            model_revision=fingerprint,
                            adapter=adapter,
                            arm=arm.name,
                            query_set=p["query_set"],
                            query_id=p["query_id"],
                            domain=p.get("domain"),
                            disability_id=p.get("disability_id"),
                            condition=p["condition"],
                            prompt_id=p["prompt_id"],
                            system_prompt=system_prompt,
                            prompt_text=p["prompt_text"],
                            temperature=temperature,
                            top_p=target.decoding.top_p,
                            max_new_tokens=target.decoding.max_new_tokens,
                            seed=seed,
                            sample_index=sample_index,
                            decoding_json=canonical_json(decoding),
                        )
                    )
    return planned


def arms_by_adapter(cfg: AuditConfig, target: Target) -> dict[str | None, list[Arm]]:
    """Arms grouped by the adapter they need, so each model variant loads once."""
    groups: dict[str | None, list[Arm]] = {}
    for arm in cfg.arms:
        groups.setdefault(arm.adapter or target.adapter, []).append(arm)
    return groups
