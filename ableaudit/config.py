"""The audit config: what to ask, whom to ask, and how.

Validated with pydantic so a typo in a YAML key is an error naming the key,
not a silently ignored setting.
"""

from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from ableaudit import PROJECT_ROOT, target
from ableaudit.backends.registry import backend_class, backend_names, backends_where
from ableaudit.errors import AbleauditError, close_matches, did_you_mean
from ableaudit.judges.dimensions import JudgeDimensions
from ableaudit.target import (
    ENV_VAR_NAME,
    PAPER_TEMPERATURE,
    VISION_TEMPERATURE,
    Temperature,
    _looks_like_key,
    _Strict,
)
from ableaudit.validation import format_validation, load_yaml_file, yaml_problem

logger = logging.getLogger(__name__)

# The backends that can serve a vision target (registered for task vision).
VISION_BACKENDS = backend_names("vision")

# The arm name under which the optional disability-assignment probe lands.
ASSIGNMENT_ARM = "disability_assignment"


class ConfigError(AbleauditError, ValueError):
    """The audit config is wrong; the message names the field and the fix."""


class Target(target.Target):
    """A target as the config reads it: ``ableaudit.target.Target``, its backend a registered
    one that serves the target's task (``ableaudit.backends.registry``)."""

    @model_validator(mode="after")
    def _vision_backend(self) -> Target:
        if self.task == "vision" and self.backend not in VISION_BACKENDS:
            raise ValueError(
                f"target {self.name!r}: task vision runs on backend {' or '.join(VISION_BACKENDS)}, not {self.backend!r}; "
                "serve the model with `vllm serve <model>` and use backend: openai with base_url"
            )
        return self

    @field_validator("backend")
    @classmethod
    def _registered_backend(cls, v: str) -> str:
        if v not in backend_names():
            raise ValueError(
                f"unknown backend {v!r}; use one of {', '.join(backend_names())}"
                f"{did_you_mean(v, backend_names())}"
            )
        return v


class Arm(_Strict):
    """A prompting condition: 'baseline', or a mitigation (another system prompt, an adapter)."""

    name: str
    system_prompt: str | None = None  # None: the target's own system prompt
    adapter: str | None = None  # a peft adapter to apply in this arm (transformers)
    # Vision targets: which prompt the disability side uses. 'mitigation' pairs the
    # neutral prompt with the mitigation prompt (factual, neutral, no assumptions).
    # A 'mitigation' arm is vision-only: text targets skip it.
    vision_prompt: Literal["neutral_disability", "mitigation"] = "neutral_disability"

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not v or not v.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"arm name {v!r} must be letters, digits, '-' or '_'")
        return v


class Judge(_Strict):
    """An LLM judge: any target (backend + model) used to score responses or pairs."""

    name: str
    kinds: list[Literal["rubric", "contrastive"]] = ["rubric", "contrastive"]
    target: Target  # the judge model; its decoding applies (use temperature 0)
    include_imported: bool = True  # judge imported responses too
    # Structured output: constrain the judge's completion to the verdict's JSON schema
    # (llama.cpp grammar; response_format on OpenAI-compatible servers such as vLLM).
    # auto = on for llamacpp and the vllm batch worker, off for openai (not every
    # OpenAI-compatible server has it; vLLM's does: set on) and transformers (cannot).
    structured_output: Literal["auto", "on", "off"] = "auto"
    # The contrastive judge's dimensions: a dimension set file or an inline set (docs/judges.md);
    # none: the built-in set (interpret, stereotype, framing; abstain in every set).
    dimensions: JudgeDimensions = None

    @model_validator(mode="after")
    def _structured_backend(self) -> Judge:
        if (
            self.structured_output == "on"
            and not backend_class(self.target.backend, self.target.task).supports_json_schema
        ):
            able = backends_where(lambda cls: cls.supports_json_schema, self.target.task)
            raise ValueError(
                f"judge {self.name!r}: structured_output: on needs backend "
                f"{', '.join(able)}, not {self.target.backend!r}; "
                "set structured_output: off (verdicts are then parsed from free text)"
            )
        return self

    @property
    def structured(self) -> bool:
        """Whether the judge's output is constrained to the verdict schema."""
        if self.structured_output == "auto":
            return backend_class(self.target.backend, self.target.task).json_schema_by_default
        return self.structured_output == "on"


class Subset(_Strict):
    """Which prompts to send. Empty lists mean 'all'.

    The same keys serve both tasks: for text, ``per_domain`` counts neutral
    queries per domain and ``query_ids`` are query ids; for vision (``vision.subset``),
    ``per_domain`` counts scenarios per category (each with all its images),
    ``query_ids`` are image ids and ``domains`` are image categories.
    """

    per_domain: int | None = Field(None, ge=1)
    """How many units (text: neutral queries; vision: scenarios) to keep in each domain, chosen by ``seed``."""
    query_ids: list[str] = []
    """Only these queries (text) or images (vision)."""
    domains: list[str] = []
    """Only these domains (text) or image categories (vision)."""
    disabilities: list[str] = []
    """Only these disability categories on the disability side; the neutral prompt always stays."""
    seed: int = 0
    """The seed of the ``per_domain`` choice."""


def _project_path(value: str) -> Path:
    """A configured path: absolute, or relative to the working directory, else to the project."""
    p = Path(value).expanduser()
    if not p.is_absolute() and not p.exists() and (PROJECT_ROOT / p).exists():
        p = PROJECT_ROOT / p
    return p


class VisionSettings(_Strict):
    """The vision audit: which images targets with ``task: vision`` describe, and how they are sampled.

    The ``vision:`` block of the config. Vision generations land under the
    image set's name as their query_set, so text and vision settings never mix.
    """

    image_set: str | None = None
    """The image set to describe, e.g. 'pairs': the query_set of vision generations."""
    image_root: str | None = None
    """The folder holding the images (for PAIRS, its data/ folder or the repository above it)."""
    manifest: str | None = None
    """A manifest CSV, or a COCO instances_*.json (`ableaudit import coco`), for an image set other than
    PAIRS; without it image_root is read as a PAIRS tree."""
    subset: Subset = Subset()
    """Which images and categories to use (per_domain: scenarios per category; query_ids: image ids)."""
    temperatures: list[Temperature] = [VISION_TEMPERATURE]
    """The sampling temperatures of vision targets; a target's own decoding.temperature wins."""
    probe_disability_assignment: bool = False
    """Also ask each vision target which of the nine categories the pictured person might have."""

    @field_validator("temperatures")
    @classmethod
    def _some_temperature(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("`vision.temperatures` must list at least one value")
        return v

    def image_root_path(self) -> Path:
        """The configured image root as an existing folder: absolute, or relative to the working directory,
        else to the project (so a config in configs/ runs from anywhere)."""
        if not self.image_root:
            raise ConfigError(
                "the config has vision targets but no `vision.image_root`; "
                "set it to the folder holding the images"
            )
        p = _project_path(self.image_root)
        if not p.is_dir():
            raise ConfigError(
                f"vision.image_root {self.image_root!r} is not a folder; point it at the folder "
                "holding the images (for PAIRS, the repository's data/ folder)"
            )
        return p.resolve()

    def images_folder(self) -> Path:
        """The folder an image's rel_path is relative to: the image root for a manifest; for PAIRS, the folder of
        its categories (the root itself or its data/ folder)."""
        from ableaudit.media import find_pairs_root

        root = self.image_root_path()
        return root if self.manifest else find_pairs_root(root)

    def manifest_path(self) -> Path | None:
        """The manifest CSV, located like image_root; None for a PAIRS tree."""
        return _project_path(self.manifest) if self.manifest else None


class AlertSettings(_Strict):
    """Where an audit run sends an alert, and on what (the ``alerts:`` block; see docs/alerts.md).

    After a built run, a regression against the target's previous run (mart run_comparison)
    or a failed error-severity gate (mart gate_results) sends one JSON summary through a
    Prefect webhook block (at most one destination; none: only the Prefect event
    ``ableaudit.audit.alert``, for an automation to act on).
    """

    webhook_url: str | None = None
    """The URL to POST the JSON summary to (a Prefect ``Webhook`` block is made from it in-process)."""
    webhook_url_env: str | None = None
    """The name of an environment variable holding that URL, for URLs that carry a token."""
    block: str | None = None
    """A saved Prefect block: ``webhook/NAME`` (gets the JSON), or ``TYPE/NAME`` of a notification block."""
    when: list[Literal["regression", "gate_failure"]] = ["regression", "gate_failure"]
    """What sends an alert: a regressed slice of this run, a failed error-severity gate, or both.
    (Not ``on:``, which YAML reads as ``true``.)"""
    report_url_base: str | None = None
    """The URL at which the report folder (``published/<warehouse>/report/``) is served."""
    timeout_s: float = Field(10.0, gt=0)
    """Seconds to wait for the receiver on each attempt."""
    retries: int = Field(2, ge=0)
    """Attempts after a failed delivery (2 s, then 10 s apart)."""

    @field_validator("webhook_url", "report_url_base")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"{v!r} is not an http(s) URL; write it as https://host/path")
        return v

    @field_validator("webhook_url_env")
    @classmethod
    def _env_is_a_name(cls, v: str | None) -> str | None:
        if v is not None and (_looks_like_key(v) or not ENV_VAR_NAME.match(v)):
            raise ValueError(
                "webhook_url_env must name an environment variable (letters, digits and '_'), "
                "not hold the URL: `export ALERT_URL=https://...` and set `webhook_url_env: ALERT_URL`"
            )
        return v

    @field_validator("block")
    @classmethod
    def _block_slug(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^[a-z0-9-]+/[a-z0-9-]+$", v):
            raise ValueError(
                f"block {v!r} must be a saved block's TYPE/NAME in lowercase with '-', "
                "as `prefect block ls` shows it, e.g. webhook/ableaudit-alerts"
            )
        return v

    @field_validator("when")
    @classmethod
    def _some_trigger(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError("`alerts.when` lists regression and/or gate_failure, each once")
        return v

    @model_validator(mode="after")
    def _one_destination(self) -> AlertSettings:
        given = [k for k in ("webhook_url", "webhook_url_env", "block") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(
                f"set one of webhook_url, webhook_url_env or block, not {' and '.join(given)}"
            )
        return self


# Deprecated top-level keys, each with the field of the `vision:` block that replaces it.
DEPRECATED_VISION_KEYS = {
    "image_set": "image_set",
    "image_root": "image_root",
    "image_manifest": "manifest",
    "vision_subset": "subset",
    "vision_temperatures": "temperatures",
    "probe_disability_assignment": "probe_disability_assignment",
}


def _listed(fields: set[str]) -> str:
    """'a applies' or 'a, b apply': the fields a message names, sorted."""
    return ", ".join(sorted(fields)) + (" applies" if len(fields) == 1 else " apply")


class TaskRunnerSettings(_Strict):
    """Where the audit's target generations and judge calls run (docs/scale-out.md).

    ``thread`` (the default): Prefect tasks on threads of the flow's process, each target
    landing its own answers. ``dask`` / ``ray``: tasks on the workers of a Dask or Ray cluster
    (prefect-dask's DaskTaskRunner, prefect-ray's RayTaskRunner); each task generates one chunk
    of ``chunk_size`` prompts of a target against that target's servers (or ``chunk_size``
    verdicts of a judge) and returns the rows, and the flow's process lands them (one writer:
    workers never open the warehouse).
    """

    kind: Literal["thread", "dask", "ray"] = "thread"
    # 'auto' (or unset): a local cluster started for the audit; else a scheduler address
    # (dask: tcp://host:8786; ray: ray://host:10001, or the head's host:6379 from inside the cluster).
    address: str | None = None
    n_workers: int | None = Field(None, ge=1)  # workers of a local cluster (address auto)
    threads_per_worker: int = Field(1, ge=1)  # dask local cluster only
    processes: bool = True  # dask local cluster: worker processes (False: threads in this process)
    # prompts (or judge verdicts) per task on dask/ray: what a lost worker costs
    chunk_size: int = Field(64, ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> TaskRunnerSettings:
        given = self.model_fields_set - {"kind"}
        if self.kind == "thread" and given:
            raise ValueError(
                f"{_listed(given)} to kind dask or ray; with kind thread "
                "use parallel_targets (or set kind: dask | ray)"
            )
        if not self.local and self.n_workers:
            raise ValueError(
                f"n_workers starts a local cluster, but address {self.address!r} names a "
                "running one; drop n_workers (the cluster has its own workers) or set address: auto"
            )
        local_dask = {"threads_per_worker", "processes"} & given
        if local_dask and (self.kind != "dask" or not self.local):
            raise ValueError(
                f"{_listed(local_dask)} to a local Dask cluster (kind dask, "
                "no address); a running cluster's workers are set where they start"
            )
        if self.kind == "dask" and not self.local:
            if "://" not in self.address and ":" not in self.address:
                raise ValueError(
                    f"address {self.address!r} is not a Dask scheduler address; "
                    "write it as tcp://HOST:8786 (or auto for a local cluster)"
                )
        return self

    @property
    def local(self) -> bool:
        """A cluster started for the audit on this machine (no address given)."""
        return self.address in (None, "auto")


class AuditConfig(_Strict):
    name: str = "audit"
    query_set: str = "ableaudit"
    subset: Subset = Subset()
    samples: int = Field(1, ge=1)
    temperatures: list[Temperature] = [PAPER_TEMPERATURE]
    arms: list[Arm] = [Arm(name="baseline")]
    targets: list[Target]
    judges: list[Judge] = []  # run after generation, inside the audit flow
    build: bool = True  # run dbt build + publish after landing
    # Targets generating at once (Prefect tasks on threads): > 1 suits served models
    # (openai targets on their own servers); in-process models share this machine's cores.
    parallel_targets: int = Field(1, ge=1)
    # Where target generations run: threads here (default), or a Dask / Ray cluster.
    task_runner: TaskRunnerSettings = TaskRunnerSettings()
    # Vision targets (task: vision) describe the images of one image set.
    vision: VisionSettings = VisionSettings()
    # 'never': a run sends only what no earlier run answered (resume). 'each_run': every run
    # asks every prompt again (a scheduled re-audit of an endpoint that may change behind its name).
    reask: Literal["never", "each_run"] = "never"
    # After a built run: alert on a regression or a failed gate (None: no alerts).
    alerts: AlertSettings | None = None
    # Release gates (docs/gates.md): a gates file whose rules the build turns into
    # gate_results and dbt tests; a path relative to the working directory or the project.
    gates: str | None = None

    def gates_path(self, config_path: str | Path | None = None) -> Path | None:
        """The gates file, checked to exist; None when the config names none."""
        if not self.gates:
            return None
        p = _project_path(self.gates)
        if not p.exists() and config_path is not None:
            beside = Path(config_path).parent / self.gates
            p = beside if beside.exists() else p
        if not p.is_file():
            raise ConfigError(
                f"gates: {self.gates!r} is not a file; point it at a gates file "
                "(e.g. configs/gates.example.yml, see docs/gates.md)"
            )
        return p.resolve()

    @model_validator(mode="before")
    @classmethod
    def _deprecated_vision_keys(cls, data: Any) -> Any:
        # A deprecated top-level key is still read: it moves into the `vision:` block,
        # with a warning naming its place there.
        if not isinstance(data, dict) or not any(k in data for k in DEPRECATED_VISION_KEYS):
            return data
        data = dict(data)
        block = data.get("vision")
        if isinstance(block, VisionSettings):
            block = block.model_dump(exclude_unset=True)
        elif block is None:
            block = {}
        if not isinstance(block, dict):
            return data  # validation names `vision` (and the old keys) as wrong
        block = dict(block)
        clashes = [
            f"`{old}` (top level) and `vision.{new}`"
            for old, new in DEPRECATED_VISION_KEYS.items()
            if old in data and new in block
        ]
        if clashes:
            raise ValueError(
                f"both set: {'; '.join(clashes)}; keep the `vision:` block's key and remove the "
                "deprecated top-level one"
            )
        for old, new in DEPRECATED_VISION_KEYS.items():
            if old in data:
                block[new] = data.pop(old)
                message = (
                    f"config key `{old}` is deprecated: move it into the `vision:` block as "
                    f"`vision.{new}` (see docs/configuration.md)"
                )
                warnings.warn(message, DeprecationWarning, stacklevel=2)
                logger.warning(message)
        data["vision"] = block
        return data

    @model_validator(mode="after")
    def _unique_names(self) -> AuditConfig:
        for what, names in (
            ("target", [t.name for t in self.targets]),
            ("arm", [a.name for a in self.arms]),
            ("judge", [j.name for j in self.judges]),
        ):
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise ValueError(f"{what} names must be unique; repeated: {sorted(dup)}")
        if not self.targets:
            raise ValueError("at least one target is needed under `targets:`")
        if not self.temperatures:
            raise ValueError("`temperatures` must list at least one value")
        if ASSIGNMENT_ARM in [a.name for a in self.arms]:
            raise ValueError(
                f"arm name {ASSIGNMENT_ARM!r} is reserved for the disability-assignment probe"
            )
        vision = [t.name for t in self.vision_targets]
        if vision and not (self.vision.image_set and self.vision.image_root):
            raise ValueError(
                f"vision targets {vision} need `image_set` (e.g. pairs) and `image_root` "
                "(the folder holding the images) in the config's `vision:` block"
            )
        return self

    @property
    def text_targets(self) -> list[Target]:
        return [t for t in self.targets if t.task == "text"]

    @property
    def vision_targets(self) -> list[Target]:
        return [t for t in self.targets if t.task == "vision"]


def parse_config(data: dict[str, Any], source: str = "<dict>") -> AuditConfig:
    if not isinstance(data, dict):
        raise ConfigError(
            f"audit config {source} must be a YAML mapping, got {type(data).__name__}"
        )
    try:
        return AuditConfig.model_validate(data, context={"config_source": source})
    except ValidationError as err:
        raise ConfigError(format_validation(err, source, data, AuditConfig)) from None


def resolve_config_path(config: str | Path) -> Path:
    """A config path as given, else relative to the project (deployments run from elsewhere)."""
    path = Path(config)
    if not path.is_absolute() and not path.exists():
        path = PROJECT_ROOT / path
    return path


def load_config(path: str | Path) -> AuditConfig:
    p = Path(path)
    if not p.is_file():
        found = (
            close_matches(p.name, [c.name for c in p.parent.glob("*.y*ml")])
            if p.parent.is_dir()
            else []
        )
        hint = f"; did you mean {str(p.parent / found[0])!r}?" if found else ""
        raise ConfigError(
            f"audit config {p} does not exist{hint}; pass --config with a YAML file "
            "(e.g. configs/default.yaml)"
        )
    try:
        data = load_yaml_file(p)
    except yaml.YAMLError as err:
        raise ConfigError(f"audit config {p} is not valid YAML {yaml_problem(err)}") from None
    return parse_config(data or {}, str(p))


# The one-line endpoint audit (`ableaudit audit --model NAME --base-url URL`): neutral queries per
# domain, as configs/default.yaml (2 x 6 domains x (1 neutral + 9 disability prompts) = 120 requests).
ENDPOINT_PER_DOMAIN = 2


def _slug(model: str) -> str:
    """A target name from a model name: its last path part, lower case, safe in any table or file."""
    tail = model.rstrip("/").rsplit("/", 1)[-1] or model
    return re.sub(r"[^a-z0-9._-]+", "-", tail.lower()).strip("-") or "model"


def endpoint_config(
    model: str,
    base_url: str | list[str] | None = None,
    *,
    backend: str = "openai",
    per_domain: int | None = ENDPOINT_PER_DOMAIN,
    api_key_env: str | None = None,
    judge_model: str | None = None,
    judge_base_url: str | list[str] | None = None,
) -> dict[str, Any]:
    """The config of the paper's audit of one model (its temperature, system prompt and token
    budget, the baseline arm, the built-in query set), ``per_domain`` neutral queries per domain
    (None: all of them), judged by ``judge_model`` when given (on ``judge_base_url``, else the
    target's server). A plain dict, in the order a config file is written."""
    target: dict[str, Any] = {"name": _slug(model), "backend": backend, "model": model}
    if model != target["name"]:
        target["model_id"] = model
    if base_url:
        target["base_url"] = base_url
    if api_key_env:
        target["api_key_env"] = api_key_env
    data: dict[str, Any] = {
        "name": target["name"],
        "query_set": "ableaudit",
        "subset": {"per_domain": per_domain, "seed": 0} if per_domain else {},
        "samples": 1,
        "temperatures": [PAPER_TEMPERATURE],
        "arms": [{"name": "baseline"}],
        "targets": [target],
    }
    if judge_model:
        url = judge_base_url or base_url
        judge: dict[str, Any] = {
            "name": _slug(judge_model),
            "backend": "openai" if url else backend,
            "model": judge_model,
            "decoding": {"temperature": 0.0},
        }
        if url:
            judge["base_url"] = url
        if api_key_env:
            judge["api_key_env"] = api_key_env
        data["judges"] = [
            {"name": judge["name"], "kinds": ["rubric", "contrastive"], "target": judge}
        ]
    return data
