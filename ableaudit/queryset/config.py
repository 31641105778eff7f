"""The config of a query-set build (``ableaudit queryset build --config FILE``).

A build makes one named, versioned query set (``NAME@VERSION``, what an audit's
``query_set:`` names) for the domains it lists, with the generator it names: any
target an audit could run (the embedded SmolLM2 by default, a served model in
practice).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from ableaudit.config import ConfigError, Target
from ableaudit.keys import canonical_json, strip_url_credentials
from ableaudit.target import Decoding, _Strict
from ableaudit.validation import format_validation, load_yaml_file, yaml_problem

NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
DOMAIN_RE = re.compile(r"[a-z][a-z0-9_]*")

DEFAULT_GENERATOR = {
    "name": "generator",
    "backend": "llamacpp",
    "model": "builtin:smollm2",
    "decoding": {"temperature": 0.7, "max_new_tokens": 256, "seed": 0},
}


class Domain(_Strict):
    """One domain the set covers."""

    id: str
    """The domain's id, as prompts and marts name it (lower case, digits, '_')."""
    description: str = Field(min_length=1)
    """What the domain is: the generator reads it, and off-domain personas are measured against it."""
    seed_personas: list[str] = []
    """Personas the set must consider (they are validated like generated ones)."""

    @field_validator("seed_personas")
    @classmethod
    def _distinct_personas(cls, v: list[str]) -> list[str]:
        folded = [p.strip().lower() for p in v]
        twice = sorted({p for p in folded if folded.count(p) > 1})
        if twice:
            raise ValueError(f"seed personas must differ; given twice: {', '.join(twice)}")
        return v

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not DOMAIN_RE.fullmatch(v):
            raise ValueError(
                f"domain id {v!r} must be lower case letters, digits and '_', starting with a "
                "letter, e.g. retail_banking"
            )
        return v


class Validation(_Strict):
    """The settings of the validation stages."""

    persona_similarity: float = Field(0.85, gt=0, le=1)
    """Cosine similarity (all-MiniLM-L6-v2) at or above which a persona is a near-duplicate of
    an earlier one of its domain."""
    query_similarity: float = Field(0.85, gt=0, le=1)
    """Cosine similarity at or above which a neutral query is a near-duplicate of an earlier
    one anywhere in the set."""
    off_domain_similarity: float = Field(0.1, ge=-1, le=1)
    """A persona whose similarity to its domain's description is below this is off-domain."""
    llm_leakage_check: bool = False
    """Also ask the generator whether each neutral query implies a disability."""


class BuildConfig(_Strict):
    name: str
    """The set's name; with ``version``, what an audit's ``query_set:`` gives (NAME@VERSION)."""
    version: str = "1"
    """The set's version: a published version is never changed; build a new one instead."""
    domains: list[Domain] = Field(min_length=1)
    personas_per_domain: int = Field(6, ge=1, le=50)
    """How many personas to ask the generator for, per domain."""
    generator: Target = Target.model_validate(DEFAULT_GENERATOR)
    """The model that writes personas and queries: an audit target (backend, model, decoding)."""
    structured_output: Literal["auto", "on", "off"] = "auto"
    """Constrain the generator's output to a JSON schema: 'auto' where the backend is known
    to honour it, 'on' where it must, 'off' to parse free text."""
    validation: Validation = Validation()
    review: Literal["required", "skip"] = "required"
    """'required': the set is published when a review sheet is imported; 'skip': at once."""
    taxonomy: str | None = None
    """A disabilities CSV (the layout of seeds/disabilities.csv); default: the project's."""

    @field_validator("name", "version")
    @classmethod
    def _names(cls, v: str) -> str:
        if not NAME_RE.fullmatch(v):
            raise ValueError(f"{v!r} must be letters, digits, '_', '-' or '.'")
        return v

    @field_validator("generator", mode="before")
    @classmethod
    def _generator_defaults(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {"name": "generator", **v}
        return v

    @model_validator(mode="after")
    def _unique_domains(self) -> BuildConfig:
        from ableaudit.ingest.querysets import BUILTIN_QUERY_SETS

        ids = [d.id for d in self.domains]
        twice = sorted({d for d in ids if ids.count(d) > 1})
        if twice:
            raise ValueError(f"domain ids must be unique; given twice: {', '.join(twice)}")
        if self.name.lower() in BUILTIN_QUERY_SETS:
            raise ValueError(f"name {self.name!r} is the built-in query set's; choose another")
        if self.structured_output == "on":
            from ableaudit.backends.registry import backend_class

            if not backend_class(self.generator.backend).supports_json_schema:
                raise ValueError(
                    f"structured_output: on needs a backend that constrains output to a JSON "
                    f"schema; {self.generator.backend} cannot (use auto or off)"
                )
        return self

    @property
    def query_set(self) -> str:
        """The published set's name in int_prompts and in an audit's ``query_set:``."""
        return f"{self.name}@{self.version}"

    @property
    def decoding(self) -> Decoding:
        return self.generator.decoding

    @property
    def structured(self) -> bool:
        from ableaudit.backends.registry import backend_class

        cls = backend_class(self.generator.backend)
        if self.structured_output == "auto":
            return cls.json_schema_by_default
        return self.structured_output == "on"

    def stored_json(self) -> str:
        """The config as landed: canonical JSON with URL credentials stripped."""
        return strip_url_credentials(canonical_json(self.model_dump(mode="json")))


def parse_build_config(data: Any, source: str = "<dict>") -> BuildConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"query-set config {source} must be a YAML mapping")
    try:
        return BuildConfig.model_validate(data)
    except ValidationError as err:
        text = format_validation(
            err, source, data, BuildConfig, "query-set config", "configs/queryset.example.yaml"
        )
        raise ConfigError(text) from None


def load_build_config(path: str | Path) -> BuildConfig:
    from ableaudit.config import resolve_config_path

    p = resolve_config_path(path)
    if not p.is_file():
        raise ConfigError(
            f"query-set config {path} does not exist; pass --config with a YAML file "
            "(e.g. configs/queryset.example.yaml)"
        )
    try:
        data = load_yaml_file(p)
    except yaml.YAMLError as err:
        raise ConfigError(f"query-set config {p} is not valid YAML {yaml_problem(err)}") from None
    return parse_build_config(data or {}, str(p))
