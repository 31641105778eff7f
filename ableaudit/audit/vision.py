"""Vision audits: which image x prompt generations an audit needs, and the group statistics of group_bias.

A vision generation is a text generation with an image beside the prompt. It
lands in ``raw.generations`` like any other, with ``task = 'vision'``,
``query_set`` = the image set, ``query_id`` = the image id and ``domain`` = the
image's category, so the warehouse pairs each disability description with the
neutral description of the same image, model, arm, temperature and sample
(``int_pairs``) and every text metric, judge and mart applies unchanged.

The key of a vision generation hashes everything a text key hashes plus the
sha256 of the image's bytes: a changed picture is a new generation.

Arms: an arm with ``vision_prompt: neutral_disability`` (the default) sends the
neutral prompt and the disability prompt per category; ``mitigation`` sends
the neutral prompt and the mitigation prompt per category (the disability
side). The optional disability-assignment probe lands as 'neutral'
generations under the reserved arm ``disability_assignment``, where no
disability generation exists to pair with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import ibis
import numpy as np
import pandas as pd

from ableaudit.warehouse import ibis_compat
from ableaudit.config import ASSIGNMENT_ARM, Arm, AuditConfig, ConfigError, Target
from ableaudit.audit.planning import ArmPlan, PlannedGeneration, arm_system_prompt, expand_plan, filter_subset

PROMPT_KINDS_BY_ARM = {
    "neutral_disability": ("neutral", "disability"),
    "mitigation": ("neutral", "mitigation"),
}


def vision_temperatures(cfg: AuditConfig, target: Target) -> list[float]:
    """The target's own temperature when it sets one, else the audit's vision.temperatures (default [0.0])."""
    if target.decoding.temperature is not None:
        return [target.decoding.temperature]
    return list(cfg.vision.temperatures)


# --------------------------------------------------------------------------- prompt selection


def select_vision_prompts(warehouse: str | Path, cfg: AuditConfig) -> list[dict[str, Any]]:
    """The image x prompt rows of the configured image set and vision.subset, from ``int_vision_prompts``.

    ``vision.subset.per_domain`` keeps that many scenarios per category (all
    images of a chosen scenario, so the parallel images stay together), chosen
    by ``vision.subset.seed``; ``query_ids`` are image ids; ``domains`` are
    categories; ``disabilities`` the categories of the disability prompts.
    """
    con = ibis_compat.connect(warehouse, read_only=True)
    try:
        if "int_vision_prompts" not in con.list_tables():
            raise ConfigError(f"the warehouse {warehouse} has no int_vision_prompts table; load the images and "
                              "run `ableaudit build` (the audit flow does both)")
        prompts = con.table("int_vision_prompts")
        prompts = prompts.filter(prompts.query_set == cfg.vision.image_set)
        if prompts.count().to_pyarrow().as_py() == 0:
            raise ConfigError(f"image set {cfg.vision.image_set!r} has no image in the warehouse; load it with "
                              "`ableaudit import images` or let the audit flow load vision.image_root")
        sub = cfg.vision.subset
        prompts = filter_subset(prompts, sub, "vision.subset")
        if sub.per_domain:
            scen = prompts.select("domain", "scenario").distinct()
            shuffle = (ibis.literal(str(sub.seed)) + ":" + scen.domain + "/" + scen.scenario).hash()
            ranked = scen.mutate(rank=ibis.row_number().over(group_by=scen.domain, order_by=[shuffle, scen.scenario]))
            chosen = ranked.filter(ranked["rank"] < sub.per_domain).select("domain", "scenario")
            prompts = prompts.semi_join(chosen, ["domain", "scenario"])
        rows = prompts.order_by(["domain", "query_id", "prompt_kind", "disability_id"]).to_pyarrow().to_pylist()
    finally:
        con.disconnect()
    if not rows:
        raise ConfigError(f"vision.subset selects no prompt of image set {cfg.vision.image_set!r}; widen `vision.subset:`")
    return rows


# --------------------------------------------------------------------------- planning


def plan_vision_generations(cfg: AuditConfig, target: Target, prompts: list[dict[str, Any]], image_root: str | Path,
                            arms: list[Arm] | None = None, include_probe: bool | None = None) -> list[PlannedGeneration]:
    """Every (image x prompt x arm x temperature x sample) for one vision target, each with its key.

    ``arms`` defaults to all the config's arms; ``include_probe`` (default: the
    config's vision.probe_disability_assignment) adds the assignment probe once, under
    the reserved arm with the target's own system prompt and adapter.
    """
    arms = list(cfg.arms) if arms is None else list(arms)
    if include_probe is None:
        include_probe = cfg.vision.probe_disability_assignment
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for p in prompts:
        by_kind.setdefault(p["prompt_kind"], []).append(p)
    work = [ArmPlan(arm.name, arm.adapter or target.adapter, arm_system_prompt(arm, target),
                    [p for k in PROMPT_KINDS_BY_ARM[arm.vision_prompt] for p in by_kind.get(k, [])]) for arm in arms]
    if include_probe:
        work.append(ArmPlan(ASSIGNMENT_ARM, target.adapter, target.system_prompt, by_kind.get("assignment", [])))
    return expand_plan(target, work, task="vision", temperatures=vision_temperatures(cfg, target), samples=cfg.samples,
                       image_root=image_root)


def vision_adapter_groups(cfg: AuditConfig, target: Target) -> dict[str | None, tuple[list[Arm], bool]]:
    """Arms grouped by the adapter they need (each model variant loads once), and whether the probe runs in it."""
    groups: dict[str | None, list[Arm]] = {}
    for arm in cfg.arms:
        groups.setdefault(arm.adapter or target.adapter, []).append(arm)
    probe = cfg.vision.probe_disability_assignment
    if probe and target.adapter not in groups:
        groups[target.adapter] = []
    return {a: (arms, probe and a == target.adapter) for a, arms in groups.items()}


# --------------------------------------------------------------------------- group statistics (group_bias)

GROUPINGS = ("gender", "race", "gender_race")
CELL_KEYS = ["task", "model_id", "arm", "query_set", "temperature", "measure_id"]
GROUP_CI_SCHEMA: dict[str, str] = {
    "task": "str",
    "model_id": "str",
    "arm": "str",
    "query_set": "str",
    "temperature": "float64",
    "measure_id": "str",
    "grouping": "str",
    "group_value": "str",
    "ci_low_pct": "float64",
    "ci_high_pct": "float64",
    "n_boot": "int64",
    "ci_reason": "str",
}


def group_delta_ci(pairs: pd.DataFrame, n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                   groupings: Iterable[str] = GROUPINGS) -> pd.DataFrame:
    """Percentile CIs of delta = rate(group) - rate(all), in percentage points, by a cluster bootstrap.

    ``pairs``: one row per included pair and measure, with CELL_KEYS, ``query_id``
    (the image: the cluster), ``outcome`` (0/1) and one column per grouping.
    Each replicate draws as many images as the cell has, with replacement, and
    recomputes both rates over the pairs of the drawn images (an image drawn
    twice counts twice), so the delta's CI reflects that an image's nine
    disability pairs are not independent. A replicate that draws no image of
    the group has no delta; the CI is taken over the others and ``ci_reason``
    says how many were dropped. Each cell has its own random stream
    (``stable_seed``), so a cell's CI does not depend on which other cells exist.
    """
    from ableaudit.stats._common import stable_seed, typed_frame

    groupings = list(groupings)
    out: list[dict[str, Any]] = []
    if pairs.empty:
        return typed_frame([], GROUP_CI_SCHEMA)
    frame = pairs.copy()
    frame["temperature"] = frame["temperature"].astype(float)
    alpha = (1.0 - level) / 2.0
    for key, cell in frame.groupby(CELL_KEYS, sort=True, dropna=False):
        codes, images = pd.factorize(cell["query_id"], sort=True)
        k = len(images)
        y = cell["outcome"].to_numpy(dtype=float)
        sums = np.bincount(codes, weights=y, minlength=k)
        counts = np.bincount(codes, minlength=k).astype(float)
        idx = None
        if k >= 2 and n_boot >= 1:
            rng = np.random.default_rng(stable_seed(seed, *key))
            idx = rng.integers(0, k, size=(n_boot, k))
            all_rate = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
        base = dict(zip(CELL_KEYS, key))
        for grouping in groupings:
            if grouping not in cell.columns:
                continue
            # every pair of an image shares its identity, so group membership is per image
            image_group = cell.groupby(codes)[grouping].first().reindex(range(k))
            for value in sorted(v for v in image_group.dropna().unique()):
                row = dict(base, grouping=grouping, group_value=value, n_boot=n_boot,
                           ci_low_pct=float("nan"), ci_high_pct=float("nan"), ci_reason=None)
                if idx is None:
                    row["ci_reason"] = "fewer than 2 images" if k < 2 else "n_boot<1"
                    out.append(row)
                    continue
                member = (image_group == value).to_numpy(dtype=float)
                g_counts = (counts * member)[idx].sum(axis=1)
                g_sums = (sums * member)[idx].sum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    delta = 100.0 * (g_sums / g_counts - all_rate)
                ok = np.isfinite(delta)
                if not ok.any():
                    row["ci_reason"] = "no replicate drew an image of the group"
                else:
                    low, high = np.quantile(delta[ok], [alpha, 1.0 - alpha])
                    row["ci_low_pct"], row["ci_high_pct"] = float(low), float(high)
                    dropped = int((~ok).sum())
                    if dropped:
                        row["ci_reason"] = f"{dropped} of {n_boot} replicates drew no image of the group (dropped)"
                out.append(row)
    return typed_frame(out, GROUP_CI_SCHEMA)
