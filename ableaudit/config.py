"""The audit config: what to ask, whom to ask, and how.

Validated with pydantic so a typo in a YAML key is an error naming the key,
not a silently ignored setting.
"""

from __future__ import annotations

import logging
import math
import re
import types
import typing
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ableaudit import PROJECT_ROOT
from ableaudit.backends.registry import backend_class, backend_names, backends_where
from ableaudit.errors import AbleauditError, close_matches, did_you_mean
from ableaudit.keys import strip_url_credentials

logger = logging.getLogger(__name__)

# The paper's generation defaults (AccessEval, section 4.1-4.2).
PAPER_SYSTEM_PROMPT = "You are a helpful assistant."
PAPER_TEMPERATURE = 0.1
PAPER_MAX_NEW_TOKENS = 1048

# The vision paper's generation defaults (section 4.1): greedy, 512 new tokens,
# zero-shot with no system prompt.
VISION_TEMPERATURE = 0.0
VISION_MAX_NEW_TOKENS = 512
VISION_SYSTEM_PROMPT = ""

# The backends that can serve a vision target (registered for task vision).
VISION_BACKENDS = backend_names("vision")

# The arm name under which the optional disability-assignment probe lands.
ASSIGNMENT_ARM = "disability_assignment"


class ConfigError(AbleauditError, ValueError):
    """The audit config is wrong; the message names the field and the fix."""


def _temperature(v: float) -> float:
    if not math.isfinite(v) or v < 0:
        raise ValueError(
            f"temperature {v} is out of range: it must be a finite number >= 0 (0 is greedy; "
            f"the paper uses {PAPER_TEMPERATURE})"
        )
    return v


Temperature = Annotated[float, AfterValidator(_temperature)]
"""A sampling temperature: finite and >= 0 (a backend would send a negative one as 0)."""


# What an environment variable's name may be; an api_key_env outside it is a pasted key.
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _looks_like_key(value: str) -> bool:
    """A value of api_key_env that is a key rather than a variable's name.

    Keys start with a vendor prefix (``sk-``), hold characters no name can, or are long
    strings of short random pieces: a name splits into words (``AzureOpenAIKeyProduction``,
    ``OPENAI_API_KEY``), a key into fragments of one or two characters (``xW9qT3bZ``).
    """
    if value.startswith(_KEY_PREFIXES) or not ENV_VAR_NAME.match(value):
        return True
    pieces = _NAME_PIECES.findall(value)
    return len(value) >= 20 and sum(map(len, pieces)) / max(len(pieces), 1) < 3


# Prefixes of vendors' API keys; `_NAME_PIECES` splits a name into its words and numbers.
_KEY_PREFIXES = ("sk-", "sk_", "pk-", "rk-", "hf_", "gsk_", "xai-", "ghp_", "github_pat_")
_NAME_PIECES = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Decoding(_Strict):
    temperature: Temperature | None = None  # None: use the audit's temperatures
    top_p: float = Field(1.0, gt=0, le=1)
    max_new_tokens: int = Field(PAPER_MAX_NEW_TOKENS, ge=1)
    seed: int | None = 0


class Target(_Strict):
    """One model under audit: a language model (task text) or a vision-language model (task vision)."""

    name: str
    backend: str  # a registered backend (ableaudit.backends.registry)
    task: Literal["text", "vision"] = "text"  # vision: describes the audit's images (image_set)
    model: str  # HF id, local path, GGUF path, 'builtin:smollm2', or served name
    model_id: str | None = None  # how marts name it; defaults to `name`
    revision: str | None = None
    adapter: str | None = None  # peft adapter path or id (transformers backend)
    system_prompt: str = PAPER_SYSTEM_PROMPT
    decoding: Decoding = Decoding()
    batch_size: int = Field(8, ge=1)
    base_url: str | list[str] | None = (
        None  # openai backend; a list: replicas of one model; else OPENAI_BASE_URL
    )
    api_key_env: str = "OPENAI_API_KEY"  # name of the env var holding the key
    params_b: float | None = Field(None, gt=0)  # parameter count in billions, for the scaling mart
    options: dict[str, Any] = {}  # backend-specific (device, dtype, n_ctx, n_threads, ...)

    @model_validator(mode="before")
    @classmethod
    def _vision_defaults(cls, data: Any) -> Any:
        # A vision target takes the vision paper's defaults where the config is silent:
        # 512 new tokens and no system prompt (temperature: VisionSettings.temperatures).
        if isinstance(data, dict) and data.get("task") == "vision":
            data = dict(data)
            data.setdefault("system_prompt", VISION_SYSTEM_PROMPT)
            decoding = data.get("decoding")
            if decoding is None:
                data["decoding"] = {"max_new_tokens": VISION_MAX_NEW_TOKENS}
            elif isinstance(decoding, dict) and "max_new_tokens" not in decoding:
                data["decoding"] = {**decoding, "max_new_tokens": VISION_MAX_NEW_TOKENS}
        return data

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

    @field_validator("api_key_env")
    @classmethod
    def _key_env_is_a_name(cls, v: str) -> str:
        if _looks_like_key(v):
            raise ValueError(
                "api_key_env must name an environment variable (letters, digits and '_', not "
                "starting with a digit), not hold the key itself: put the key in an env var, e.g. "
                "`export MY_API_KEY=...`, and set `api_key_env: MY_API_KEY`"
            )
        return v

    @field_validator("base_url")
    @classmethod
    def _urls(cls, v: str | list[str] | None) -> str | list[str] | None:
        urls = [v] if isinstance(v, str) else v
        if urls is None:
            return v
        if not urls or any(not u.strip() for u in urls):
            raise ValueError(
                "base_url must be a URL or a non-empty list of URLs (replicas serving the same model)"
            )
        if len(set(urls)) != len(urls):
            shown = [strip_url_credentials(u) for u in urls]
            raise ValueError(f"base_url lists a server twice: {shown}; list each replica once")
        for url in urls:
            _check_url(url)
        return v

    @model_validator(mode="after")
    def _base_url_backend(self) -> Target:
        if self.base_url is not None and self.backend != "openai":
            raise ValueError(
                f"target {self.name!r}: base_url is for backend openai (a served model); backend "
                f"{self.backend!r} runs the model itself. Remove base_url or use backend: openai"
            )
        return self

    @property
    def base_urls(self) -> list[str]:
        """The servers of an openai target (empty: OPENAI_BASE_URL or the OpenAI API)."""
        return (
            []
            if self.base_url is None
            else [self.base_url]
            if isinstance(self.base_url, str)
            else list(self.base_url)
        )

    @property
    def reported_model_id(self) -> str:
        return self.model_id or self.name


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
        from ableaudit.ingest.images import find_pairs_root

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


def _check_url(url: str) -> None:
    """A base_url is an http(s) URL with a host: ``banana`` is a mistake about the URL, not the key."""
    shown = strip_url_credentials(url)
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"base_url {shown!r} is not a URL: write the server's address with its scheme and "
            "path, e.g. http://127.0.0.1:8000/v1 (what `vllm serve` listens on)"
        )


def _model_class(tp: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X``, ``list[X]``, ``X | None``), if any."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    if typing.get_origin(tp) in (list, typing.Union, types.UnionType, Annotated):
        for arg in typing.get_args(tp):
            found = _model_class(arg)
            if found is not None:
                return found
    return None


def _keys_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys are allowed at ``loc`` (the place a key sits in the config)."""
    model: type[BaseModel] | None = AuditConfig
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        field_info = model.model_fields.get(str(part))
        model = _model_class(field_info.annotation) if field_info else None
    return model


def _unknown_key(loc: tuple[Any, ...]) -> str:
    """What to say about an unknown key: the near miss, the block it belongs in, or the keys allowed."""
    key, model = str(loc[-1]), _keys_at(loc[:-1])
    if model is None:
        return "unknown key"
    allowed = list(model.model_fields)
    hint = did_you_mean(key, allowed)
    if hint:
        return f"unknown key {key!r}{hint}"
    for name, field_info in model.model_fields.items():
        nested = _model_class(field_info.annotation)
        if nested is not None and key in nested.model_fields:
            return f"unknown key {key!r} here; it belongs under `{name}:`"
        near = close_matches(key, nested.model_fields if nested is not None else [], n=1)
        if near:
            return f"unknown key {key!r}; did you mean {near[0]!r} under `{name}:`?"
    return f"unknown key {key!r}; the keys allowed here are {', '.join(allowed)}"


def _where(loc: tuple[Any, ...], data: Any) -> str:
    """A config place: its dotted path, then the names of the entries on the way, e.g.
    ``targets.0.decoding.temperature (target 'smollm2')``."""
    names, node, parent = [], data, ""
    for part in loc:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and 0 <= part < len(node) else None
            if isinstance(node, dict) and isinstance(node.get("name"), str):
                names.append(f"{parent.removesuffix('s')} {node['name']!r}")
        else:
            node = node.get(part) if isinstance(node, dict) else None
            parent = str(part)
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    return f"{dotted} ({', '.join(names)})" if names else dotted


def _format_validation(err: ValidationError, source: str, data: Any = None) -> str:
    lines = [f"invalid audit config ({source}):"]
    for e in err.errors():
        loc = tuple(e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = _unknown_key(loc)
        elif msg.startswith("Input should be") and "input" in e:
            ranged = e["type"].startswith(("greater_than", "less_than"))
            said = "is out of range: it must be" if ranged else "is wrong: it must be"
            msg = f"{e['input']!r} {said}{msg.removeprefix('Input should be')}"
        lines.append(f"  - {_where(loc, data)}: {msg}")
    lines.append("Fix the fields above; see configs/default.yaml for a complete example.")
    return "\n".join(lines)


def parse_config(data: dict[str, Any], source: str = "<dict>") -> AuditConfig:
    if not isinstance(data, dict):
        raise ConfigError(
            f"audit config {source} must be a YAML mapping, got {type(data).__name__}"
        )
    try:
        return AuditConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation(err, source, data)) from None


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
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"audit config {p} is not valid YAML: {err}") from None
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
