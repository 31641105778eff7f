"""From prompts and a config to the list of generations an audit needs: one path for text and vision.

A text target answers the prompts of the dbt model ``int_prompts``; a vision
target describes the images of the config's image set under the prompts of
``int_vision_prompts``. Everything the two tasks differ in is data, held by an
:class:`AuditTask` (``audit_task``): the table and the query set, the subset
and what its ``per_domain`` counts, the order, the temperatures, which prompts
an arm sends, and whether the disability-assignment probe runs. The selection
is an ibis expression, so it runs on any backend ibis supports.

An arm sends the prompts whose role (text: ``condition``; vision:
``prompt_kind``) its ``vision_prompt`` names: ``neutral_disability`` (the
default) the neutral and the disability prompts; ``mitigation`` (vision only:
text targets skip such an arm) the neutral prompt and the mitigation prompt on
the disability side. The vision probe lands as 'neutral' generations under the
reserved arm ``disability_assignment``, where no disability generation exists
to pair with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import ibis
import pyarrow as pa

from ableaudit.config import ASSIGNMENT_ARM, Arm, AuditConfig, ConfigError, Subset, Target
from ableaudit.ingest.responses import UNIT
from ableaudit.keys import canonical_json, content_key, model_fingerprint
from ableaudit.records import PlannedGeneration
from ableaudit.warehouse import connect, ibis_compat


@dataclass(frozen=True)
class AuditTask:
    """One task of an audit (text or vision) as data: what it selects, and how its targets are planned."""

    kind: Literal["text", "vision"]
    """The ``task`` of its targets and of the generations they land."""
    table: str
    """The dbt model its prompts come from."""
    query_set: str | None
    """The query set (text) or image set (vision) whose prompts it sends (vision: None when not configured)."""
    set_key: str
    """The config key naming ``query_set``, for error messages."""
    subset: Subset
    """Which of the set's prompts to send."""
    subset_key: str
    """The config key holding ``subset``, for error messages."""
    unit: tuple[str, ...]
    """What ``subset.per_domain`` counts in a domain; a chosen unit keeps all its prompts
    (text: a query; vision: a scenario, with every image of it)."""
    order_by: tuple[str, ...]
    """The order prompts are selected and planned in ('-column' sorts descending). A query's (an
    image's) neutral prompt comes before its other prompts, so the answers land pair by pair and
    any prefix of a run holds complete pairs."""
    role: str
    """The prompt column that says which side of a pair a prompt is (an arm sends some roles)."""
    arm_roles: Mapping[str, tuple[str, ...]]
    """For each ``Arm.vision_prompt``, the roles such an arm sends; an arm whose value is absent is skipped."""
    probe_role: str | None
    """The role the disability-assignment probe sends under ASSIGNMENT_ARM; None: no probe."""
    load_hint: str
    """How a missing set gets into the warehouse."""
    targets: tuple[Target, ...]
    """The config's targets of this task."""
    arms: tuple[Arm, ...]
    """The config's arms this task runs (those whose ``vision_prompt`` it has roles for)."""
    temperatures: tuple[float, ...]
    """The task's temperatures; a target's own ``decoding.temperature`` wins."""
    samples: int
    """Repeated samples of every prompt."""


_PAIR = ("neutral", "disability")


def audit_task(cfg: AuditConfig, kind: str) -> AuditTask:
    """The text or the vision task of ``cfg``: the one place the two differ."""
    if kind == "text":
        fields: dict[str, Any] = {
            "table": "int_prompts",
            "query_set": cfg.query_set,
            "set_key": "query_set",
            "subset": cfg.subset,
            "subset_key": "subset",
            "unit": ("query_id",),
            "order_by": ("domain", "query_id", "-condition", "disability_id"),
            "role": "condition",
            "arm_roles": {"neutral_disability": _PAIR},
            "probe_role": None,
            "load_hint": "load it first, e.g. `ableaudit import queries accesseval.csv --query-set accesseval`",
            "temperatures": tuple(cfg.temperatures),
        }
    elif kind == "vision":
        vision = cfg.vision
        fields = {
            "table": "int_vision_prompts",
            "query_set": vision.image_set,
            "set_key": "vision.image_set",
            "subset": vision.subset,
            "subset_key": "vision.subset",
            "unit": ("domain", "scenario"),
            "order_by": ("domain", "query_id", "-prompt_kind", "disability_id"),
            "role": "prompt_kind",
            "arm_roles": {"neutral_disability": _PAIR, "mitigation": ("neutral", "mitigation")},
            "probe_role": "assignment" if vision.probe_disability_assignment else None,
            "load_hint": "load it with `ableaudit import images` or let the audit flow load `vision.image_root`",
            "temperatures": tuple(vision.temperatures),
        }
    else:
        raise ValueError(f"unknown task {kind!r}; a task is 'text' or 'vision'")
    return AuditTask(
        kind=kind,
        targets=tuple(t for t in cfg.targets if t.task == kind),
        arms=tuple(a for a in cfg.arms if a.vision_prompt in fields["arm_roles"]),
        samples=cfg.samples,
        **fields,
    )


# --------------------------------------------------------------------------- prompt selection


def select_prompts(
    warehouse: str | Path, cfg: AuditConfig, kind: str = "text"
) -> list[dict[str, Any]]:
    """The prompts of the task's set and subset, read from its table in the warehouse.

    ``subset.per_domain`` keeps that many units per domain, chosen by
    ``subset.seed`` among the units that have a neutral prompt: whole queries
    (text) or whole scenarios with all their images (vision), so a pair or a
    set of parallel images is never split.
    """
    task = audit_task(cfg, kind)
    con = ibis_compat.connect(warehouse, read_only=True)
    try:
        if task.table not in con.list_tables():
            raise ConfigError(
                f"the warehouse {warehouse} has no {task.table} table; run `ableaudit build` "
                "(the audit flow builds it before selecting prompts)"
            )
        prompts = con.table(task.table)
        known_sets = sorted(
            prompts.select("query_set").distinct().to_pyarrow()["query_set"].to_pylist()
        )
        if task.query_set not in known_sets:
            raise ConfigError(
                f"{task.set_key} {task.query_set!r} is not in the warehouse's {task.table} "
                f"(found: {known_sets}); {task.load_hint}"
            )
        prompts = prompts.filter(prompts.query_set == task.query_set)
        sub = task.subset
        prompts = filter_subset(prompts, sub, task.subset_key)
        if sub.per_domain:
            prompts = prompts.semi_join(_sample_units(prompts, task.unit, sub), list(task.unit))
        order = [ibis.desc(c[1:]) if c.startswith("-") else c for c in task.order_by]
        rows = prompts.order_by(order).to_pyarrow().to_pylist()
    finally:
        con.disconnect()
    if not rows:
        raise ConfigError(
            f"`{task.subset_key}` selects no prompt of {task.set_key} {task.query_set!r}; "
            f"widen `{task.subset_key}:`"
        )
    return rows


def _sample_units(prompts: ibis.Table, unit: tuple[str, ...], sub: Subset) -> ibis.Table:
    """A deterministic, seed-dependent choice of ``sub.per_domain`` units in each domain."""
    units = prompts.filter(prompts.condition == "neutral")
    units = units.select(*dict.fromkeys(("domain", *unit))).distinct()
    label = units[unit[0]]
    for column in unit[1:]:
        label = label + "/" + units[column]
    shuffle = (ibis.literal(str(sub.seed)) + ":" + label).hash()
    ranked = units.mutate(
        rank=ibis.row_number().over(
            group_by=units.domain, order_by=[shuffle, *(units[c] for c in unit)]
        )
    )
    return ranked.filter(ranked["rank"] < sub.per_domain).select(*unit)


def filter_subset(prompts: ibis.Table, sub: Subset, field: str) -> ibis.Table:
    """Keep the prompts of the subset's domains, queries and disabilities (the neutral prompt stays with
    its query); a value the prompts do not have is a ConfigError naming ``field`` (subset, vision.subset)."""
    for column, wanted, label in (
        ("domain", sub.domains, "domains"),
        ("query_id", sub.query_ids, "query_ids"),
        ("disability_id", sub.disabilities, "disabilities"),
    ):
        if not wanted:
            continue
        known = set(prompts.select(column).distinct().to_pyarrow()[column].to_pylist())
        unknown = sorted(set(wanted) - known)
        if unknown:
            shown = sorted(k for k in known if k)
            raise ConfigError(
                f"{field}.{label} names unknown values {unknown}; known (first 20 of {len(shown)}): "
                f"{shown[:20]}"
            )
    if sub.domains:
        prompts = prompts.filter(prompts.domain.isin(sub.domains))
    if sub.query_ids:
        prompts = prompts.filter(prompts.query_id.isin(sub.query_ids))
    if sub.disabilities:
        prompts = prompts.filter(
            prompts.disability_id.isnull() | prompts.disability_id.isin(sub.disabilities)
        )
    return prompts


@dataclass(frozen=True)
class ArmPlan:
    """What one arm asks: its name, the adapter and system prompt it runs with, and its prompts."""

    arm: str
    adapter: str | None
    system_prompt: str | None
    prompts: list[dict[str, Any]]


def expand_plan(
    target: Target,
    arm_plans: Iterable[ArmPlan],
    *,
    task: str,
    temperatures: Iterable[float],
    samples: int,
    image_root: str | Path | None = None,
    round_id: str | None = None,
) -> list[PlannedGeneration]:
    """Every (arm x temperature x sample x prompt), each with its key: the one place a generation's identity is built.

    The key hashes everything that determines the answer: task, backend, model
    fingerprint, adapter fingerprint, arm, prompt, system prompt, decoding,
    sample and backend options, plus the image's sha256 for a vision prompt
    (one with ``rel_path`` and ``image_sha256``; ``image_root`` is then required),
    and the model_id the row reports (a row belongs to one model in the marts).
    Not the server: replicas of one model (``base_url`` lists) share keys.
    ``round_id`` (a run's id, under ``reask: each_run``) makes every key that run's own,
    so the run asks again what earlier runs answered; None keeps the keys run-independent.
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
                    if round_id is not None:
                        identity["round"] = round_id
                    image: dict[str, Any] = {}
                    if p.get("image_sha256") is not None:
                        if root is None:
                            raise ValueError(
                                f"prompt {p['prompt_id']} carries an image but no image_root was given"
                            )
                        identity["image_sha256"] = p["image_sha256"]
                        image = {
                            "image_root": root,
                            "image_rel_path": p["rel_path"],
                            "image_sha256": p["image_sha256"],
                        }
                    planned.append(
                        PlannedGeneration(
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
                        )
                    )
    return planned


def arm_system_prompt(arm: Arm, target: Target) -> str | None:
    """The arm's own system prompt, else the target's (the paper's default)."""
    return arm.system_prompt if arm.system_prompt is not None else target.system_prompt


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class TargetPlan:
    """What one target must generate, grouped by the adapter each group loads."""

    target: Target
    """The target of the config."""
    groups: list[tuple[str | None, list[PlannedGeneration]]]
    """(adapter, its planned generations): each model variant loads once."""

    @property
    def planned(self) -> list[PlannedGeneration]:
        """Every planned generation of the target, group after group."""
        return [p for _, planned in self.groups for p in planned]


def adapter_groups(task: AuditTask, target: Target) -> list[tuple[str | None, list[Arm], bool]]:
    """The task's arms grouped by the adapter they need, so each model variant loads once, and whether the
    task's probe runs in the group (the one of the target's own adapter, made for it when no arm uses it)."""
    groups: dict[str | None, list[Arm]] = {}
    for arm in task.arms:
        groups.setdefault(arm.adapter or target.adapter, []).append(arm)
    probe = task.probe_role is not None
    if probe and target.adapter not in groups:
        groups[target.adapter] = []
    return [
        (adapter, arms, probe and adapter == target.adapter) for adapter, arms in groups.items()
    ]


def plan_task(
    cfg: AuditConfig,
    kind: str,
    prompts: list[dict[str, Any]],
    image_root: str | Path | None = None,
    run_id: str | None = None,
) -> list[TargetPlan]:
    """Every target of task ``kind`` ('text' | 'vision') with its planned generations, by adapter group.

    Each target plans (arm x temperature x sample x prompt), an arm sending
    the prompts of its roles; a vision prompt's image is read under
    ``image_root`` at send time. Under ``reask: each_run`` the keys are the run's own.
    """
    if cfg.reask == "each_run" and run_id is None:
        raise ValueError("reask: each_run plans a run's own generations: pass the run_id")
    round_id = run_id if cfg.reask == "each_run" else None
    task = audit_task(cfg, kind)
    plans = []
    for target in task.targets:
        temperatures = (
            [target.decoding.temperature]
            if target.decoding.temperature is not None
            else task.temperatures
        )
        groups = []
        for adapter, arms, probe in adapter_groups(task, target):
            work = [
                ArmPlan(
                    arm.name,
                    adapter,
                    arm_system_prompt(arm, target),
                    [p for p in prompts if p[task.role] in task.arm_roles[arm.vision_prompt]],
                )
                for arm in arms
            ]
            if probe:
                work.append(
                    ArmPlan(
                        ASSIGNMENT_ARM,
                        target.adapter,
                        target.system_prompt,
                        [p for p in prompts if p[task.role] == task.probe_role],
                    )
                )
            groups.append(
                (
                    adapter,
                    expand_plan(
                        target,
                        work,
                        task=task.kind,
                        temperatures=temperatures,
                        samples=task.samples,
                        image_root=image_root,
                        round_id=round_id,
                    ),
                )
            )
        plans.append(TargetPlan(target, groups))
    return plans


# --------------------------------------------------------------------------- imported units


IMPORTED_UNIT = (*UNIT, "sample_index")
"""What one answer stands for (``ableaudit.ingest.responses.UNIT`` and the sample): two landed
rows of one unit are two pairs of it in int_pairs."""

UNITS_SHOWN = 3


def imported_units(warehouse: str | Path, plans: Iterable[TargetPlan]) -> dict[tuple, str | None]:
    """The imported units (``IMPORTED_UNIT``) of the plans' tasks and model_ids, each with the
    landing that brought its row (``id (source)``; None for a row landed before landings had
    ids and with no run id), read from raw.generations and raw.landings."""
    wanted = sorted({(p.task, p.model_id) for plan in plans for p in plan.planned})
    if not wanted:
        return {}
    con = connect(warehouse)
    try:
        con.register(
            "audit_models",
            pa.table(
                {
                    "task": pa.array([t for t, _ in wanted], pa.string()),
                    "model_id": pa.array([m for _, m in wanted], pa.string()),
                }
            ),
        )
        rows = con.execute(
            f"select {', '.join('g.' + c for c in IMPORTED_UNIT)}, "
            "coalesce(l.landing_id || coalesce(' (' || l.source || ')', ''), 'run ' || g.run_id) "
            "from raw.generations g join audit_models using (task, model_id) "
            "left join raw.landings l on l.landing_id = g.landing_id "
            "where g.source = 'imported'"
        ).fetchall()
    finally:
        con.close()
    return {tuple(r[:-1]): r[-1] for r in rows}


def _unit_of(p: PlannedGeneration) -> tuple:
    return tuple(getattr(p, c) for c in IMPORTED_UNIT)


def _at_any_temperature(unit: tuple) -> tuple:
    at = IMPORTED_UNIT.index("temperature")
    return (*unit[:at], None, *unit[at + 1 :])


def _sort_key(unit: tuple) -> tuple:
    return tuple("" if v is None else str(v) for v in unit)


def refuse_imported_units(plans: Iterable[TargetPlan], imported: dict[tuple, str | None]) -> None:
    """Refuse an audit whose targets would answer units that already hold an imported answer.

    Both answers would count (a second pair of the unit in int_pairs, imported and generated
    provenance mixed in one model's figures), so the audit stops before it generates anything;
    it never skips such units silently. One message names, per target, its model_id, how many
    of its planned units are imported and by which landing, and the fix.
    """
    lines, clashing = [], []
    for plan in plans:
        planned = {_unit_of(p) for p in plan.planned}
        # an answer imported without a temperature stands for the unit at any temperature
        found = {u: imported.get(u, imported.get(_at_any_temperature(u), "")) for u in planned}
        clash = sorted((u for u, r in found.items() if r != ""), key=_sort_key)
        if not clash:
            continue
        clashing.append(plan.target)
        landings = sorted({r for u in clash if (r := found[u]) is not None})
        origin = (
            f"landed by {', '.join(landings)}"
            if landings
            else "imported before landings were recorded, so their file is not known"
        )
        shown = "; ".join(
            f"{u[3]}:{u[4]} {u[5] or 'neutral'}, arm {u[2]}, temperature {u[6]}, sample {u[7]}"
            for u in clash[:UNITS_SHOWN]
        )
        more = f" and {len(clash) - UNITS_SHOWN} more" if len(clash) > UNITS_SHOWN else ""
        lines.append(
            f"target {plan.target.name!r} (task {plan.target.task}, model_id "
            f"{plan.target.reported_model_id!r}): {len(clash)} of its {len(planned)} planned units "
            f"are already imported ({origin}): {shown}{more}"
        )
    if not lines:
        return
    model_id = clashing[0].reported_model_id
    raise ConfigError(
        "the audit would answer units whose responses were landed by `ableaudit import "
        "responses`, and both answers would count; the audit stopped before sending a request "
        "of this task:\n  "
        + "\n  ".join(lines)
        + "\nGive the target a distinct `model_id:` (or, without one, a distinct `name:`) in the "
        f"config, e.g. `model_id: {model_id}-audited`, so the audit's answers are its own; or "
        "remove the import first (`ableaudit history` lists the landings; `ableaudit forget "
        "LANDING_ID` removes one)."
    )
