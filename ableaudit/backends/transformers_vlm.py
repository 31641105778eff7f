"""Hugging Face transformers backend for vision-language models (image + text in, text out).

Any checkpoint ``AutoModelForImageTextToText`` loads (LLaVA, Qwen2-VL and
Qwen2.5-VL, Idefics, Gemma 3, InternVL-HF, ...), optionally with a peft
adapter, batched, on the GPU when there is one. Offline by default exactly
like the text backend (``local_files_only`` unless ``ABLEAUDIT_ALLOW_DOWNLOAD=1``).

Each request carries one or more encoded images (``request.images``); they
go, in order, at the start of the last user message as ``{"type": "image"}``
content parts, followed by the prompt text, and the model's chat template
places them. Decoding is what the request says, the same as the text backend
(vendor sampling defaults dropped, greedy at temperature 0, a seeded
per-request sampler above it: see transformers_backend).

Image processing, two paths:

* ``processor`` (used when Pillow is installed): the checkpoint's own
  ``AutoProcessor`` (image processor, placeholder expansion, chat template),
  with images decoded by Pillow. This is the path for real VLMs. At load the
  processor is probed once on a blank picture (no forward pass): it must load,
  encode the picture, and, for LLaVA, expand the placeholder to as many tokens
  as the vision tower yields features. A processor that fails the probe (e.g. a
  checkpoint without ``processor_config.json``: no ``patch_size``) is
  *incomplete*: with ``image_processing: auto`` the backend falls back to the
  built-in path when that path handles the checkpoint (logged, ``self.mode``
  says which path runs), otherwise it raises one BackendError naming the fix;
  with ``image_processing: processor`` it always raises.
* ``builtin`` (used when Pillow is missing, or with ``options.image_processing:
  builtin``): transformers cannot build image processors without Pillow or
  torchvision, so for LLaVA-architecture checkpoints with a CLIP- or
  SigLIP-style image processor this backend does the same steps itself:
  decode (PNG, via ableaudit.ingest.images.decode_png), convert to RGB, resize
  (shortest edge or height x width, bicubic with antialiasing in torch), centre
  crop, rescale, normalise, per ``preprocessor_config.json``; the image
  placeholder is expanded to the number of features the vision tower yields,
  from the model's config ((size / patch)^2, +CLS for CLIP, -1 for the
  'default' feature strategy). Other architectures raise BackendError asking
  for Pillow.

options (``target.options``): as the text backend (device, dtype,
attn_implementation, trust_remote_code, chat_template, merge_adapter,
ignore_eos), plus ``image_processing``: auto | processor | builtin.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ableaudit.media import image_bytes

from .base import (
    Backend,
    BackendError,
    GenerationRequest,
    GenerationResult,
    Stopwatch,
)
from .registry import refuse_json_schema
from .transformers_backend import HFGenerationMixin

if TYPE_CHECKING:
    from ..target import Target

BUILTIN_IMAGE_PROCESSORS = (
    "CLIPImageProcessor",
    "CLIPImageProcessorFast",
    "CLIPImageProcessorPil",
    "SiglipImageProcessor",
    "SiglipImageProcessorFast",
    "SiglipImageProcessorPil",
)
BUILTIN_MODEL_TYPES = ("llava",)
PROCESSOR_FIX = (
    "complete the checkpoint's processor files (preprocessor_config.json; for LLaVA also "
    "processor_config.json with patch_size, vision_feature_select_strategy and "
    "num_additional_image_tokens), or set options.image_processing: builtin"
)

log = logging.getLogger(__name__)


def pillow_available() -> bool:
    try:
        import PIL.Image  # noqa: F401
    except ImportError:
        return False
    return True


def _chat_messages(req: GenerationRequest) -> list[dict[str, Any]]:
    """Messages as content-part lists, the request's images first in the last user message."""
    msgs: list[dict[str, Any]] = []
    for m in req.messages:
        content = m.get("content")
        parts = (
            [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        )
        msgs.append({"role": m["role"], "content": parts})
    if req.images:
        users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
        if not users:
            raise ValueError("request has images but no user message to attach them to")
        last = users[-1]
        msgs[last]["content"] = [{"type": "image"} for _ in req.images] + msgs[last]["content"]
    return msgs


# --------------------------------------------------------------------------- built-in image processing


class BuiltinImageProcessor:
    """CLIP/SigLIP-style preprocessing in NumPy and torch, read from ``preprocessor_config.json``."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        kind = cfg.get("image_processor_type") or ""
        if kind not in BUILTIN_IMAGE_PROCESSORS:
            raise BackendError(
                f"image processor {kind or '(unnamed)'} needs Pillow (and torchvision): the built-in "
                f"path handles {list(BUILTIN_IMAGE_PROCESSORS)} only. Install Pillow in this environment"
            )
        self.cfg = cfg
        self.do_convert_rgb = cfg.get("do_convert_rgb", True)
        self.do_resize = cfg.get("do_resize", True)
        self.size = cfg.get("size") or {}
        self.resample = int(cfg.get("resample", 3) or 3)
        self.do_center_crop = cfg.get("do_center_crop", False)
        self.crop_size = cfg.get("crop_size") or {}
        self.do_rescale = cfg.get("do_rescale", True)
        self.rescale_factor = float(cfg.get("rescale_factor", 1 / 255))
        self.do_normalize = cfg.get("do_normalize", True)
        self.mean = cfg.get("image_mean") or [0.5, 0.5, 0.5]
        self.std = cfg.get("image_std") or [0.5, 0.5, 0.5]

    @staticmethod
    def decode(data: bytes) -> Any:
        from ableaudit.media import decode_png, image_format

        fmt = image_format(data)
        if fmt != "png":
            raise ValueError(
                f"the built-in image path decodes PNG only, got {fmt or 'unknown'}; install Pillow"
            )
        return decode_png(data)

    def __call__(self, data: bytes) -> Any:
        import numpy as np
        import torch

        img = self.decode(data)  # H x W x C uint8
        if img.shape[2] in (2, 4):  # drop alpha
            img = img[:, :, :-1]
        if img.shape[2] == 1 and self.do_convert_rgb:
            img = np.repeat(img, 3, axis=2)
        x = (
            torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float()[None]
        )  # 1 x C x H x W
        h, w = x.shape[-2:]
        if self.do_resize:
            if "shortest_edge" in self.size:
                s = int(self.size["shortest_edge"])
                short, long = (w, h) if w <= h else (h, w)
                new_short, new_long = s, int(s * long / short)
                nh, nw = (new_long, new_short) if w <= h else (new_short, new_long)
            elif "height" in self.size and "width" in self.size:
                nh, nw = int(self.size["height"]), int(self.size["width"])
            else:
                raise BackendError(
                    f"preprocessor size {self.size} is not supported by the built-in path; install Pillow"
                )
            if (nh, nw) != (h, w):
                mode = {2: "bilinear", 3: "bicubic"}.get(self.resample, "bicubic")
                x = torch.nn.functional.interpolate(
                    x, size=(nh, nw), mode=mode, align_corners=False, antialias=True
                )
                x = x.clamp(0, 255).round()
        if self.do_center_crop and self.crop_size:
            ch, cw = int(self.crop_size["height"]), int(self.crop_size["width"])
            h, w = x.shape[-2:]
            if ch > h or cw > w:
                x = torch.nn.functional.pad(
                    x,
                    (
                        max(0, (cw - w) // 2),
                        max(0, cw - w - (cw - w) // 2),
                        max(0, (ch - h) // 2),
                        max(0, ch - h - (ch - h) // 2),
                    ),
                )
                h, w = x.shape[-2:]
            top, left = (h - ch) // 2, (w - cw) // 2
            x = x[..., top : top + ch, left : left + cw]
        if self.do_rescale:
            x = x * self.rescale_factor
        if self.do_normalize:
            mean = torch.tensor(self.mean, dtype=torch.float32)[None, :, None, None]
            std = torch.tensor(self.std, dtype=torch.float32)[None, :, None, None]
            x = (x - mean) / std
        return x[0]  # C x H x W float32


def _json_file(model_ref: str, name: str, common: dict[str, Any]) -> dict[str, Any] | None:
    p = Path(model_ref) / name
    if p.is_file():
        return json.loads(p.read_text())
    try:
        from transformers.utils import cached_file

        found = cached_file(
            model_ref,
            name,
            revision=common.get("revision"),
            local_files_only=common.get("local_files_only", True),
            _raise_exceptions_for_missing_entries=False,
        )
    except Exception:
        return None
    return json.loads(Path(found).read_text()) if found else None


def llava_image_features(config: Any, height: int, width: int) -> int:
    """How many features a LLaVA vision tower yields for a height x width picture (what the model checks)."""
    vision = config.vision_config
    patch = int(vision.patch_size)
    n = (height // patch) * (width // patch)
    if getattr(vision, "model_type", "") == "clip_vision_model":
        n += 1  # CLS
    if getattr(config, "vision_feature_select_strategy", "default") == "default":
        n -= 1  # the model drops the first feature
    return n


def processor_problem(processor: Any, config: Any, chat_template: str | None) -> str | None:
    """Why ``processor`` cannot encode an image for this model, or None: a probe on a blank picture, no forward pass."""
    if (
        getattr(processor, "image_processor", None) is None
        or getattr(processor, "tokenizer", None) is None
    ):
        return (
            f"AutoProcessor gave a {type(processor).__name__}, not a processor with an image processor and a "
            "tokenizer"
        )
    from PIL import Image

    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "probe"}]}]
    try:
        text = processor.apply_chat_template(
            msgs, chat_template=chat_template, add_generation_prompt=True, tokenize=False
        )
        enc = processor(
            images=[Image.new("RGB", (64, 64), (127, 127, 127))], text=[text], return_tensors="pt"
        )
    except Exception as e:  # noqa: BLE001 - any failure here is the processor's, reported with its cause
        return f"it cannot encode a probe picture ({type(e).__name__}: {e})"
    if "pixel_values" not in enc:
        return "it yields no pixel_values for a picture"
    if getattr(config, "model_type", None) == "llava":
        token_id = getattr(config, "image_token_id", None)
        if token_id is None:
            token_id = getattr(config, "image_token_index", None)
        h, w = enc["pixel_values"].shape[-2:]
        expected = llava_image_features(config, int(h), int(w))
        got = int((enc["input_ids"] == token_id).sum())
        if got != expected:
            return (
                f"it expands the image placeholder to {got} tokens, but the vision tower yields {expected} "
                "features per picture"
            )
    return None


# --------------------------------------------------------------------------- the backend


class TransformersVLMBackend(HFGenerationMixin, Backend):
    name = "transformers"
    supports_stream = False
    supports_json_schema = False
    json_schema_by_default = False
    supports_images = True

    def __init__(self, target: Target, adapter: str | None = None) -> None:
        try:
            import torch
            from transformers import AutoModelForImageTextToText, AutoTokenizer
        except ImportError as e:  # pragma: no cover - the audit venv has them
            raise BackendError(
                f"the transformers VLM backend needs torch and transformers ({e})"
            ) from None
        self._torch = torch
        opts, dtype = self._configure(target, adapter)
        mode = opts.get("image_processing", "auto")
        if mode not in ("auto", "processor", "builtin"):
            raise BackendError(
                f"options.image_processing={mode!r} is not one of auto, processor, builtin"
            )
        requested = mode
        self.mode_note: str | None = (
            None  # why auto mode runs the built-in path despite Pillow, if it does
        )
        if mode == "auto":
            mode = "processor" if pillow_available() else "builtin"
        if mode == "processor" and not pillow_available():
            raise BackendError(
                "options.image_processing=processor needs Pillow; install it or use image_processing: builtin"
            )
        self.mode = mode
        model_ref, is_dir, local_only, common = self._locate(target, opts)
        try:
            load_kw: dict[str, Any] = dict(common, dtype=dtype)
            if opts.get("attn_implementation"):
                load_kw["attn_implementation"] = opts["attn_implementation"]
            model = AutoModelForImageTextToText.from_pretrained(model_ref, **load_kw)
            self.tokenizer = AutoTokenizer.from_pretrained(model_ref, **common)
        except (OSError, ValueError) as e:
            hint = (
                "it is not in the local HF cache; download it first (`hf download "
                f"{target.model}`), point `model:` at a local directory, or set ABLEAUDIT_ALLOW_DOWNLOAD=1"
                if local_only and not is_dir
                else "check that the directory holds a transformers VLM checkpoint "
                "(config.json, weights, processor and tokenizer files)"
            )
            raise BackendError(
                f"cannot load VLM {target.model!r} (target {target.name!r}): {e}\nFix: {hint}"
            ) from None

        self.processor = None
        problem = None
        if self.mode == "processor":
            from transformers import AutoProcessor

            try:
                self.processor = AutoProcessor.from_pretrained(model_ref, **common)
            except Exception as e:  # noqa: BLE001 - a missing/unreadable processor file: incomplete, said below
                problem = (
                    f"AutoProcessor cannot load it ({type(e).__name__}: {str(e).splitlines()[0]})"
                )
        template = (
            opts.get("chat_template")
            or getattr(self.processor, "chat_template", None)
            or getattr(self.tokenizer, "chat_template", None)
        )
        if not template:
            raise BackendError(
                f"model {target.model!r} has no chat template; set options.chat_template"
            )
        self.chat_template = template
        if self.mode == "processor" and problem is None:
            problem = processor_problem(self.processor, model.config, template)
        if problem is not None:
            said = f"the processor of VLM {target.model!r} (target {target.name!r}) is incomplete: {problem}"
            if requested != "auto":
                raise BackendError(
                    f"options.image_processing=processor: {said}\nFix: {PROCESSOR_FIX}"
                )
            try:
                self._setup_builtin(model_ref, model.config, common)
            except BackendError as e:
                raise BackendError(
                    f"{said}; the built-in image path cannot take over: {e}\nFix: {PROCESSOR_FIX} "
                    "(if the built-in path handles this checkpoint)"
                ) from None
            log.warning("%s; using the built-in image path instead (image_processing: auto)", said)
            self.processor, self.mode, self.mode_note = None, "builtin", said
        elif self.mode == "builtin":
            self._setup_builtin(model_ref, model.config, common)
        else:
            self.tokenizer = self.processor.tokenizer

        self._finish_setup(model, target, local_only, opts)
        self.model_dtype = next(self.model.parameters()).dtype

    # ------------------------------------------------------------------ setup

    def _setup_builtin(self, model_ref: str, config: Any, common: dict[str, Any]) -> None:
        model_type = getattr(config, "model_type", None)
        if model_type not in BUILTIN_MODEL_TYPES:
            raise BackendError(
                f"the built-in image path handles LLaVA-architecture checkpoints only (this one is "
                f"{model_type!r}); others need Pillow (and torchvision) and the checkpoint's own "
                "processor"
            )
        pre = _json_file(model_ref, "preprocessor_config.json", common)
        proc = _json_file(model_ref, "processor_config.json", common) or {}
        if pre is None and isinstance(proc.get("image_processor"), dict):
            pre = proc["image_processor"]
        if pre is None:
            raise BackendError(
                f"model {self.target.model!r} has no preprocessor_config.json, which the built-in image "
                "path needs (the image size, mean and std)"
            )
        self.image_processor = BuiltinImageProcessor(pre)
        self.model_config = (
            config  # image tokens per picture: what the vision tower yields (model config)
        )
        self.image_token = (
            proc.get("image_token") or getattr(self.tokenizer, "image_token", None) or "<image>"
        )
        ids = self.tokenizer.encode(self.image_token, add_special_tokens=False)
        expected = getattr(config, "image_token_id", None)
        if expected is None:
            expected = getattr(config, "image_token_index", None)
        if len(ids) != 1 or (expected is not None and ids[0] != expected):
            raise BackendError(
                f"image token {self.image_token!r} encodes to {ids}, but the model expects id {expected}; "
                "fix the tokenizer or processor_config.json"
            )
        self.image_token_id = ids[0]

    # ------------------------------------------------------------------ encoding

    def _prompt_text(self, req: GenerationRequest) -> str:
        messages = _chat_messages(req)
        if self.processor is not None:
            return self.processor.apply_chat_template(
                messages,
                chat_template=self.chat_template,
                add_generation_prompt=True,
                tokenize=False,
            )
        return self.tokenizer.apply_chat_template(
            messages, chat_template=self.chat_template, add_generation_prompt=True, tokenize=False
        )

    def _encode(self, req: GenerationRequest) -> dict[str, Any]:
        """Everything one request needs before batching; errors here fail that request alone."""
        refuse_json_schema(req, "transformers")
        text = self._prompt_text(req)
        if self.processor is not None:
            from PIL import Image

            images = []
            for k, b in enumerate(map(image_bytes, req.images)):
                try:
                    images.append(Image.open(io.BytesIO(b)).convert("RGB"))
                except Exception as e:  # noqa: BLE001 - PIL raises several kinds
                    from ableaudit.media import image_format

                    raise ValueError(
                        f"cannot decode image {k + 1} of the request ({len(b)} bytes, format "
                        f"{image_format(b) or 'unknown'}): {type(e).__name__}"
                    ) from None
            return {"text": text, "images": images, "length": len(text)}
        pixels = [self.image_processor(image_bytes(b)) for b in req.images]
        n_placeholders = text.count(self.image_token)
        if n_placeholders != len(pixels):
            raise ValueError(
                f"the chat template wrote {n_placeholders} image placeholders for {len(pixels)} images"
            )
        # as the model's processor does: each placeholder becomes as many image tokens as
        # the vision tower yields features, then the whole text is tokenized once
        pieces = text.split(self.image_token)
        expanded = pieces[0]
        for k, p in enumerate(pixels):
            h, w = p.shape[-2:]
            expanded += (
                self.image_token * llava_image_features(self.model_config, int(h), int(w))
                + pieces[k + 1]
            )
        ids = self.tokenizer(expanded, add_special_tokens=False)["input_ids"]
        return {"ids": ids, "pixels": pixels, "length": len(ids)}

    def _batch_inputs(self, encoded: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
        torch = self._torch
        if self.processor is not None:
            images = [im for e in encoded for im in e["images"]]
            inputs = self.processor(
                images=images or None,
                text=[e["text"] for e in encoded],
                return_tensors="pt",
                padding=True,
            )
            inputs = dict(inputs)
        else:
            width = max(len(e["ids"]) for e in encoded)
            input_ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)
            attn = torch.zeros((len(encoded), width), dtype=torch.long)
            for row, e in enumerate(encoded):
                input_ids[row, width - len(e["ids"]) :] = torch.tensor(e["ids"], dtype=torch.long)
                attn[row, width - len(e["ids"]) :] = 1
            inputs = {"input_ids": input_ids, "attention_mask": attn}
            pixels = [p for e in encoded for p in e["pixels"]]
            if pixels:
                inputs["pixel_values"] = torch.stack(pixels)
        width = int(inputs["input_ids"].shape[1])
        moved = {}
        for k, v in inputs.items():
            if hasattr(v, "to"):
                v = v.to(self.device)
                if k == "pixel_values" and v.is_floating_point():
                    v = v.to(self.model_dtype)
            moved[k] = v
        return moved, width

    # ------------------------------------------------------------------ generation

    def _encoded_length(self, encoded: dict[str, Any]) -> int:
        return encoded["length"]

    def _run_batch(
        self, items: list[tuple[int, GenerationRequest, dict[str, Any]]]
    ) -> list[GenerationResult]:
        sw = Stopwatch()
        inputs, width = self._batch_inputs([e for _, _, e in items])
        prompt_lens = inputs["attention_mask"].sum(dim=1).tolist()
        return self._generate_batch(items, inputs, width, prompt_lens, sw)
