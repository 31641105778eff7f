"""Hugging Face transformers backend: any local or cached causal LM, optionally with a peft adapter.

Offline by default. Models load with ``local_files_only=True`` so a typo or a
model that was never downloaded fails in a second with a message, instead of
hanging on a download inside a pipeline run. Set ``ABLEAUDIT_ALLOW_DOWNLOAD=1``
to let it fetch from the Hub.

Batching: requests are sorted by (max_new_tokens, prompt length), cut into
chunks of ``target.batch_size``, left-padded and generated together; results
come back in the caller's order. Sorting keeps padding (wasted compute) small.

Decoding is exactly what the request says. The model's own
``generation_config.json`` sampling defaults (top_k, repetition_penalty, ...)
are dropped, so the audit's decoding is the same on every backend; only the
EOS/PAD/BOS ids are kept.

Sampling and reproducibility: temperature 0 is greedy. For temperature > 0
each request samples with its own CPU ``torch.Generator`` seeded from
``request.seed`` (a logits processor draws the token; generate then picks it),
so a request's random stream does not depend on its neighbours in the batch
or on the device.
What is guaranteed: the same prompt, seed, batch composition, model, dtype and
device give the same text. Across different batch compositions the logits of
a row can differ in the last float bits (padding changes kernel shapes), which
can occasionally flip a sampled token; greedy output is subject to the same
caveat only at exact ties. ``seed=None`` draws a fresh seed (not reproducible).

Counting: ``completion_tokens`` includes the EOS token when the model stopped
(as vLLM and llama.cpp count it); the text never contains it.
``latency_ms`` is the wall time of the batch the request ran in.

options (``target.options``):
  device: auto | cpu | cuda | cuda:N (auto: cuda when available)
  dtype: auto | float32 | bfloat16 | float16 (default: float32 on CPU, auto = checkpoint dtype on GPU)
  attn_implementation: passed to from_pretrained (e.g. sdpa, flash_attention_2)
  trust_remote_code: bool (default false)
  chat_template: a Jinja template overriding the tokenizer's (for models without one)
  merge_adapter: fold the LoRA into the weights for speed (default false: keeps the adapter exact)
  ignore_eos: generate exactly max_new_tokens (benchmarks only)
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import chunks, cut_completion, model_revision_string
from .base import (
    Backend,
    BackendError,
    GenerationCancelled,
    GenerationRequest,
    GenerationResult,
    Stopwatch,
)
from .registry import refuse_json_schema

if TYPE_CHECKING:
    from ..target import Target

_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
}


def _resolve_device(name: str) -> str:
    import torch

    if name in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise BackendError(
            f"options.device={name!r} but torch sees no CUDA GPU; use device: cpu (or auto)"
        )
    return name


def _resolve_dtype(name: str | None, device: str) -> Any:
    import torch

    if name in (None, "", "auto"):
        return torch.float32 if device == "cpu" else "auto"
    if name not in _DTYPES:
        raise BackendError(f"options.dtype={name!r} is not one of auto, float32, bfloat16, float16")
    return getattr(torch, _DTYPES[name])


class _RowSampler:
    """Per-row temperature / top-p sampling with one seeded generator per request.

    HF ``generate`` samples the whole batch from the global RNG, so one
    request's tokens would depend on its batch neighbours. Here each sampled
    row takes its uniform draw from its own CPU ``torch.Generator`` (so the
    random stream is the same on any device), picks the token by inverse CDF,
    and the scores become a one-hot, so greedy decoding in ``generate`` emits
    the drawn token. Greedy rows (temperature 0) pass through untouched. The
    math is batched; only the B scalar draws loop in Python.
    """

    def __init__(
        self, temps: Sequence[float], top_ps: Sequence[float], seeds: Sequence[int]
    ) -> None:
        import torch

        self.rows = [i for i, t in enumerate(temps) if t > 0]
        self.temps = torch.tensor([temps[i] for i in self.rows], dtype=torch.float32)
        self.top_ps = torch.tensor([top_ps[i] for i in self.rows], dtype=torch.float32)
        self.nucleus = bool((self.top_ps < 1.0).any())
        self.gens = [torch.Generator().manual_seed(int(seeds[i])) for i in self.rows]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if not self.rows:
            return scores
        dev = scores.device
        rows = torch.tensor(self.rows, device=dev)
        probs = torch.softmax(scores[rows].float() / self.temps.to(dev)[:, None], dim=-1)
        if self.nucleus:
            probs, order = torch.sort(probs, dim=-1, descending=True)
            keep = (torch.cumsum(probs, dim=-1) - probs) < self.top_ps.to(dev)[
                :, None
            ]  # the top token always stays
            probs = probs * keep
        cdf = torch.cumsum(probs, dim=-1)
        u = torch.tensor([torch.rand(1, generator=g).item() for g in self.gens], device=dev)
        # right=True never lands on a zero-probability token; the factor keeps u below the total
        pos = torch.searchsorted(cdf, (u * cdf[:, -1] * (1 - 1e-6))[:, None], right=True)
        pos = pos.clamp_(max=cdf.shape[-1] - 1)
        tok = order.gather(1, pos) if self.nucleus else pos
        out = scores.clone()
        out[rows] = float("-inf")
        out[rows[:, None], tok] = 0.0
        return out


def _stopping_criterion(check: Any) -> Any:
    """A transformers StoppingCriteria calling ``check(input_ids, scores)`` after each token."""
    from transformers import StoppingCriteria

    class Criterion(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return check(input_ids, scores)

    return Criterion()


class HFGenerationMixin:
    """What the text and vision transformers backends share: adapter loading, batching by
    length with a one-by-one retry, greedy or per-row seeded sampling, the EOS cut, close().

    A subclass sets model, tokenizer, batch_size, concurrency, device, eos_ids, pad_id,
    ignore_eos and _torch (``_configure`` and ``_finish_setup`` set most), and defines _encode(req) (errors there fail that request alone),
    _encoded_length(encoded) and _run_batch(items), which builds the model inputs
    and calls _generate_batch.
    """

    def _load_adapter(self, model: Any, adapter: str, local_only: bool, merge: bool) -> Any:
        try:
            from peft import PeftModel
        except ImportError as e:  # pragma: no cover
            raise BackendError(f"adapter {adapter!r} needs peft ({e})") from None
        kw: dict[str, Any] = {}
        if not Path(adapter).is_dir():
            if adapter.startswith((".", "/", "~")):
                raise BackendError(
                    f"adapter path {adapter!r} does not exist; fix `adapter:` in the target or arm"
                )
            kw["local_files_only"] = local_only
        try:
            pm = PeftModel.from_pretrained(model, adapter, **kw)
        except Exception as e:  # peft raises ValueError/OSError/HF errors alike
            raise BackendError(
                f"cannot load peft adapter {adapter!r}: {type(e).__name__}: {e}\n"
                "Fix: point `adapter:` at a directory saved by peft's save_pretrained "
                "(adapter_config.json + adapter_model.safetensors) for this base model"
            ) from None
        return pm.merge_and_unload() if merge else pm

    def _configure(self, target: Target, adapter: str | None) -> tuple[dict[str, Any], Any]:
        """The target's settings every transformers backend reads: (options, torch dtype)."""
        opts = dict(target.options or {})
        self.target = target
        self.batch_size = int(target.batch_size)
        self.concurrency = self.batch_size  # one padded batch per forward pass
        self.adapter = adapter or target.adapter
        self.device = _resolve_device(opts.get("device", "auto"))
        self.ignore_eos = bool(opts.get("ignore_eos", False))
        return opts, _resolve_dtype(opts.get("dtype"), self.device)

    @staticmethod
    def _locate(target: Target, opts: dict[str, Any]) -> tuple[str, bool, bool, dict[str, Any]]:
        """(model reference, is a local folder, hub cache only, from_pretrained kwargs); a missing path fails here."""
        local_only = os.environ.get("ABLEAUDIT_ALLOW_DOWNLOAD") != "1"
        model_ref = target.model
        is_dir = Path(model_ref).expanduser().is_dir()
        if is_dir:
            model_ref = str(Path(model_ref).expanduser())
        elif model_ref.startswith((".", "/", "~")):
            raise BackendError(
                f"model path {target.model!r} does not exist; fix `model:` for target {target.name!r}"
            )
        common: dict[str, Any] = dict(
            revision=target.revision,
            local_files_only=local_only,
            trust_remote_code=bool(opts.get("trust_remote_code", False)),
        )
        return model_ref, is_dir, local_only, common

    def _finish_setup(
        self, model: Any, target: Target, local_only: bool, opts: dict[str, Any]
    ) -> None:
        """After loading: the adapter, the device, EOS and pad tokens (left padding), and a generation config
        stripped of the vendor's sampling defaults (see the module docstring); sets model and model_revision."""
        from transformers import GenerationConfig

        if self.adapter:
            model = self._load_adapter(
                model, self.adapter, local_only, bool(opts.get("merge_adapter", False))
            )
        model.to(self.device)
        model.eval()
        self.model = model
        gc = model.generation_config
        eos = gc.eos_token_id if gc.eos_token_id is not None else self.tokenizer.eos_token_id
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in eos_ids:
            eos_ids.append(self.tokenizer.eos_token_id)
        if not eos_ids:
            raise BackendError(
                f"model {target.model!r} defines no EOS token; generation could never stop"
            )
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.convert_ids_to_tokens(eos_ids[0])
        self.tokenizer.padding_side = "left"
        self.eos_ids = eos_ids
        self.pad_id = self.tokenizer.pad_token_id
        self.vendor_generation_config = gc
        model.generation_config = GenerationConfig(
            eos_token_id=eos_ids, pad_token_id=self.pad_id, bos_token_id=gc.bos_token_id
        )
        self.model_revision = model_revision_string(target.model, target.revision, self.adapter)

    # ------------------------------------------------------------------ generation

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        results: list[GenerationResult | None] = [None] * len(requests)
        encoded: dict[int, Any] = {}
        for i, req in enumerate(requests):
            try:
                encoded[i] = self._encode(req)
            except Exception as e:
                results[i] = GenerationResult.failed(req.key, e)
        order = sorted(
            encoded, key=lambda i: (requests[i].max_new_tokens, self._encoded_length(encoded[i]))
        )
        for chunk in chunks(order, self.batch_size):
            if self.cancelled:
                raise GenerationCancelled([r for r in results if r is not None])
            items = [(i, requests[i], encoded[i]) for i in chunk]
            try:
                out = self._run_batch(items)
            except GenerationCancelled:
                raise GenerationCancelled([r for r in results if r is not None]) from None
            except Exception as e:
                if len(items) == 1:
                    out = [GenerationResult.failed(items[0][1].key, e)]
                else:
                    # One bad item (or OOM) must not cost the others: retry one by one.
                    out = []
                    for it in items:
                        try:
                            out += self._run_batch([it])
                        except Exception as e1:
                            out.append(GenerationResult.failed(it[1].key, e1))
            for i, res in zip(chunk, out):
                results[i] = res
        assert all(r is not None for r in results)
        return results  # type: ignore[return-value]

    def _generate_batch(
        self,
        items: list[tuple[int, GenerationRequest, Any]],
        inputs: dict[str, Any],
        width: int,
        prompt_lens: Sequence[int],
        sw: Stopwatch,
    ) -> list[GenerationResult]:
        """Generate for one left-padded batch (inputs on the device, prompts ``width`` wide) and cut each row."""
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        max_new = max(r.max_new_tokens for _, r, _ in items)
        gen_cfg = GenerationConfig(
            max_new_tokens=max_new,
            min_new_tokens=max_new if self.ignore_eos else None,
            do_sample=False,
            num_beams=1,
            repetition_penalty=1.0,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
        )
        processors = LogitsProcessorList()
        temps = [max(0.0, float(r.temperature)) for _, r, _ in items]
        if any(t > 0 for t in temps):
            seeds = [r.seed if r.seed is not None else secrets.randbits(63) for _, r, _ in items]
            processors.append(_RowSampler(temps, [float(r.top_p) for _, r, _ in items], seeds))
        torch = self._torch

        def cancelled(input_ids: Any, scores: Any, **kw: Any) -> Any:
            # checked after every token: cancel() ends the whole batch there
            return torch.full(
                (input_ids.shape[0],), self.cancelled, dtype=torch.bool, device=input_ids.device
            )

        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                generation_config=gen_cfg,
                logits_processor=processors,
                stopping_criteria=StoppingCriteriaList([_stopping_criterion(cancelled)]),
            )
        if self.cancelled:
            raise GenerationCancelled()  # the batch was cut off: none of it is an answer
        new = out[:, width:].tolist()
        ms = sw.ms()
        eos = set(self.eos_ids)
        results = []
        for row, (_, req, _) in enumerate(items):
            body, finish, n = cut_completion(new[row], req.max_new_tokens, eos, self.ignore_eos)
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            results.append(
                GenerationResult.from_text(
                    req.key,
                    text,
                    finish_reason=finish,
                    prompt_tokens=int(prompt_lens[row]),
                    completion_tokens=n,
                    latency_ms=ms,
                    model_revision=self.model_revision,
                )
            )
        return results

    def close(self) -> None:
        model = getattr(self, "model", None)
        if model is None:
            return
        self.model = None
        del model
        import gc

        gc.collect()
        if self._torch.cuda.is_available():
            self._torch.cuda.empty_cache()


class TransformersBackend(HFGenerationMixin, Backend):
    name = "transformers"
    supports_stream = False
    supports_json_schema = False
    json_schema_by_default = False
    supports_images = False  # task vision runs on TransformersVLMBackend

    def __init__(self, target: Target, adapter: str | None = None) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:  # pragma: no cover - the audit venv has them
            raise BackendError(
                f"the transformers backend needs torch and transformers ({e}); "
                "install requirements.lock or use backend: llamacpp/openai"
            ) from None

        self._torch = torch
        opts, dtype = self._configure(target, adapter)
        model_ref, is_dir, local_only, common = self._locate(target, opts)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_ref, **common)
            load_kw: dict[str, Any] = dict(common, dtype=dtype)
            if opts.get("attn_implementation"):
                load_kw["attn_implementation"] = opts["attn_implementation"]
            model = AutoModelForCausalLM.from_pretrained(model_ref, **load_kw)
        except (OSError, ValueError) as e:
            hint = (
                "it is not in the local HF cache; download it first (`hf download "
                f"{target.model}`), point `model:` at a local directory, or set ABLEAUDIT_ALLOW_DOWNLOAD=1"
                if local_only and not is_dir
                else "check that the directory holds a transformers checkpoint"
            )
            raise BackendError(
                f"cannot load model {target.model!r} (target {target.name!r}): {e}\nFix: {hint}"
            ) from None

        if opts.get("chat_template"):
            self.tokenizer.chat_template = opts["chat_template"]
        if not getattr(self.tokenizer, "chat_template", None):
            raise BackendError(
                f"model {target.model!r} has no chat template (a base model?); set "
                "options.chat_template to a Jinja template or use an instruct model"
            )

        self._finish_setup(model, target, local_only, opts)

    # ------------------------------------------------------------------ generation

    def _encode(self, req: GenerationRequest) -> list[int]:
        refuse_json_schema(req, "transformers")
        if req.images:
            raise ValueError(
                "the transformers backend is text-only; send image requests to backend openai or vllm"
            )
        text = self.tokenizer.apply_chat_template(
            list(req.messages), tokenize=False, add_generation_prompt=True
        )
        # The template already wrote BOS etc.; adding them again would change the prompt.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _encoded_length(self, encoded: list[int]) -> int:
        return len(encoded)

    def _run_batch(
        self, items: list[tuple[int, GenerationRequest, list[int]]]
    ) -> list[GenerationResult]:
        torch = self._torch
        sw = Stopwatch()
        width = max(len(ids) for _, _, ids in items)
        input_ids = torch.full((len(items), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(items), width), dtype=torch.long)
        for row, (_, _, ids) in enumerate(items):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attn[row, width - len(ids) :] = 1
        inputs = {"input_ids": input_ids.to(self.device), "attention_mask": attn.to(self.device)}
        return self._generate_batch(items, inputs, width, [len(ids) for _, _, ids in items], sw)
