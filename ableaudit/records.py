"""Typed records that flow between the layers: planning, backends, landing.

They hold values only. Nothing here reads a file or a database: an image a
request carries is an ``ImageRef`` that the backend reads when it sends it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class ImageRef:
    """An image of a landed image set, read by the backend when the request is sent."""

    root: str
    """The image set's root folder on this machine."""
    rel_path: str
    """POSIX path under ``root`` (never absolute, never '..'), as in ``raw.images``."""
    sha256: str | None = None
    """The digest landed with the image; reading checks the bytes against it."""


@dataclass(frozen=True)
class GenerationRequest:
    """One call to a model: chat messages plus decoding."""

    key: str
    """The generation_id (or judgment_id); results carry it back."""
    messages: tuple[dict, ...]
    """Chat messages: ({"role": "system", ...}, {"role": "user", ...})."""
    temperature: float = 0.1
    """Sampling temperature; 0 means greedy."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 1048
    """Cap on the completion's length in tokens."""
    seed: int | None = None
    """Sampling seed, where the backend honours one."""
    images: tuple[bytes | ImageRef, ...] = ()
    """Images for vision targets: encoded bytes (PNG/JPEG) or a reference read at send time."""
    json_schema: dict | None = field(default=None, compare=False)
    """A JSON Schema the completion must follow (judges' verdicts). A backend that
    cannot constrain its output fails the request rather than ignore it."""


@dataclass
class GenerationResult:
    """What a backend returns for one request; a failure is a result, never a lost batch."""

    key: str
    """The request's key."""
    status: str
    """'ok' | 'empty' (the model said nothing) | 'error' (the call failed)."""
    text: str | None = None
    """The completion; None for an error."""
    finish_reason: str | None = None
    """'stop' | 'length' | ... as the engine reports it, normalised."""
    error: str | None = None
    """Why the call failed ('error' only)."""
    prompt_tokens: int | None = None
    """Tokens of the prompt, where the engine counts them."""
    completion_tokens: int | None = None
    """Tokens of the completion, where the engine counts them."""
    latency_ms: float | None = None
    """Wall time of the call (or of the batch it was part of)."""
    model_revision: str | None = None
    """What the engine says answered (a served checkpoint, an API model version);
    None leaves the planned revision in place."""

    @classmethod
    def from_text(cls, key: str, text: str | None, **kw: Any) -> GenerationResult:
        """A successful call: 'empty' when the model said nothing but whitespace."""
        status = "ok" if text is not None and text.strip() else "empty"
        return cls(key=key, status=status, text=text if text is not None else "", **kw)

    @classmethod
    def failed(
        cls, key: str, exc: BaseException | str, latency_ms: float | None = None
    ) -> GenerationResult:
        from ableaudit.redaction import redact

        msg = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        return cls(key=key, status="error", error=redact(msg), latency_ms=latency_ms)


@dataclass(frozen=True)
class PlannedGeneration:
    """One row of raw.generations before the model has answered."""

    generation_id: str
    """Content key of everything that determines the answer (``keys.content_key``)."""
    task: str
    """'text' | 'vision'."""
    target: str
    """The target's name in the audit config."""
    model_id: str
    """The model's name in every mart."""
    backend: str
    """transformers | llamacpp | openai | vllm."""
    model_revision: str
    """What pins the weights as planned (``keys.model_fingerprint``); a revision the
    backend reports at answer time replaces it when the row lands."""
    adapter: str | None
    """A peft adapter path or id, if any."""
    arm: str
    """'baseline' or a mitigation arm's name."""
    query_set: str
    """The query set (text) or image set (vision)."""
    query_id: str
    """The query (text) or image (vision) id."""
    domain: str | None
    """The query's domain (text) or the image's category (vision)."""
    disability_id: str | None
    """None for the neutral prompt."""
    condition: str
    """'neutral' | 'disability'."""
    prompt_id: str
    """The prompt's id in int_prompts / int_vision_prompts."""
    system_prompt: str
    """The arm's system prompt ('' for none)."""
    prompt_text: str
    """The user message."""
    temperature: float
    """Sampling temperature."""
    top_p: float
    """Nucleus sampling mass."""
    max_new_tokens: int
    """Completion cap in tokens."""
    seed: int | None
    """Sampling seed."""
    sample_index: int
    """Which of the repeated samples of one prompt this is."""
    decoding_json: str
    """Every decoding parameter, canonical JSON."""
    image_root: str | None = None
    """Vision only: the image set's root (not landed; prompt_id and the key name the image)."""
    image_rel_path: str | None = None
    """Vision only: the image's path under ``image_root``."""
    image_sha256: str | None = None
    """Vision only: the image's landed digest."""

    def request(self) -> GenerationRequest:
        """The call that answers this plan; an image travels as a reference, read at send time."""
        messages: tuple[dict, ...] = ({"role": "user", "content": self.prompt_text},)
        if self.system_prompt:
            messages = ({"role": "system", "content": self.system_prompt}, *messages)
        images: tuple[ImageRef, ...] = ()
        if self.image_rel_path is not None:
            images = (ImageRef(self.image_root or ".", self.image_rel_path, self.image_sha256),)
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


@dataclass
class LandingReport:
    """What one landing did to its raw table."""

    inserted: int = 0
    """New keys."""
    retried: int = 0
    """Error rows replaced by a new attempt."""
    unchanged: int = 0
    """Rows already landed as a result, left as they were."""
    errors: int = 0
    """Rows of this batch that are errors."""

    def __iadd__(self, other: LandingReport) -> LandingReport:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self
