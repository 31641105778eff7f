"""The audit config: what to ask, whom to ask, and how.

Validated with pydantic so a typo in a YAML key is an error naming the key,
not a silently ignored setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# The paper's generation defaults (AccessEval, section 4.1-4.2).
PAPER_SYSTEM_PROMPT = "You are a helpful assistant."
PAPER_TEMPERATURE = 0.1
PAPER_MAX_NEW_TOKENS = 1048

BACKENDS = ("transformers", "llamacpp", "openai", "vllm")


class ConfigError(ValueError):
    """The audit config is wrong; the message names the field and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Decoding(_Strict):
    temperature: float | None = None      # None: use the audit's temperatures
    top_p: float = 1.0
    max_new_tokens: int = Field(PAPER_MAX_NEW_TOKENS, ge=1)
    seed: int | None = 0


class Target(_Strict):
    """One model under audit."""

    name: str
    backend: Literal["transformers", "llamacpp", "openai", "vllm"]
    model: str                             # HF id, local path, GGUF path, 'builtin:smollm2', or served name
    model_id: str | None = None            # how marts name it; defaults to `name`
    revision: str | None = None
    adapter: str | None = None             # peft adapter path or id (transformers backend)
    system_prompt: str = PAPER_SYSTEM_PROMPT
    decoding: Decoding = Decoding()
    batch_size: int = Field(8, ge=1)
    base_url: str | None = None            # openai backend; else OPENAI_BASE_URL
    api_key_env: str = "OPENAI_API_KEY"    # name of the env var holding the key
    params_b: float | None = None          # parameter count in billions, for the scaling mart
    options: dict[str, Any] = {}           # backend-specific (device, dtype, n_ctx, n_threads, ...)

    @property
    def reported_model_id(self) -> str:
        return self.model_id or self.name


class Arm(_Strict):
    """A prompting condition: 'baseline', or a mitigation (another system prompt, an adapter)."""

    name: str
    system_prompt: str | None = None       # None: the target's own system prompt
    adapter: str | None = None             # a peft adapter to apply in this arm (transformers)

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
    target: Target                         # the judge model; its decoding applies (use temperature 0)
    include_imported: bool = True          # judge imported responses too


class Subset(_Strict):
    """Which queries to send. Empty lists mean 'all'."""

    per_domain: int | None = Field(None, ge=1)   # neutral queries per domain, chosen by seed
    query_ids: list[str] = []
    domains: list[str] = []
    disabilities: list[str] = []
    seed: int = 0


class AuditConfig(_Strict):
    name: str = "audit"
    query_set: str = "ableaudit"
    subset: Subset = Subset()
    samples: int = Field(1, ge=1)
    temperatures: list[float] = [PAPER_TEMPERATURE]
    arms: list[Arm] = [Arm(name="baseline")]
    targets: list[Target]
    judges: list[Judge] = []               # run after generation, inside the audit flow
    build: bool = True                     # run dbt build + publish after landing

    @model_validator(mode="after")
    def _unique_names(self) -> "AuditConfig":
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
        return self


def _format_validation(err: ValidationError, source: str) -> str:
    lines = [f"invalid audit config ({source}):"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"  - {loc}: {e['msg']}")
    lines.append("Fix the fields above; see configs/default.yaml for a complete example.")
    return "\n".join(lines)


def parse_config(data: dict[str, Any], source: str = "<dict>") -> AuditConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"audit config {source} must be a YAML mapping, got {type(data).__name__}")
    try:
        return AuditConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation(err, source)) from None


def load_config(path: str | Path) -> AuditConfig:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"audit config {p} does not exist; pass --config with a YAML file (e.g. configs/default.yaml)")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"audit config {p} is not valid YAML: {err}") from None
    return parse_config(data or {}, str(p))
