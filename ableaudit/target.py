"""One model under audit, as a backend receives it: ``Target`` and its ``Decoding``.

A record of the records layer: the backends take it, and the audit config
(``ableaudit.config``) reads it from a file, checking its backend against the backend
registry there. The checks here need nothing but the values: the paper's defaults, a
temperature in range, an API key's variable that is a name and not a key, a base URL
that is a URL.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from ableaudit.keys import strip_url_credentials

# The paper's generation defaults (AccessEval, section 4.1-4.2).
PAPER_SYSTEM_PROMPT = "You are a helpful assistant."
PAPER_TEMPERATURE = 0.1
PAPER_MAX_NEW_TOKENS = 1048

# The vision paper's generation defaults (section 4.1): greedy, 512 new tokens,
# zero-shot with no system prompt.
VISION_TEMPERATURE = 0.0
VISION_MAX_NEW_TOKENS = 512
VISION_SYSTEM_PROMPT = ""


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
