"""DPO fine-tuning of a LoRA adapter on exported preference pairs (TRL's DPOTrainer), and its registration.

The base is the audited model as a transformers causal LM: an HF id (offline:
the local cache only, unless ``ABLEAUDIT_ALLOW_DOWNLOAD=1``), a local
checkpoint folder, or ``builtin:smollm2`` (the embedded default's GGUF,
de-quantised once by transformers into ``<adapters root>/base/smollm2-<version>/``,
so the re-audit can load the same weights with the transformers backend).

The adapter is a peft LoRA (``task_type=CAUSAL_LM``) saved by peft, which is
exactly what an arm's ``adapter:`` loads (``ableaudit.backends.transformers_backend``).
It is registered in ``raw.adapters`` (kind 'dpo') with its base, the hash of
the training file, the training log and every parameter.

TRL 1.16 runs beside the stack (transformers 5, peft 0.21, torch 2.13), offline,
so the DPO loss is TRL's own (sigmoid loss, the reference model being the base
with the adapter disabled), not a re-implementation.

Vision pairs (an export with ``task='vision'``: TRL's VLM layout, an image part
in the user turn and ``images: [path]``) train a vision-language model, as in
the VLM paper's DPO mitigation (prompt = disability prompt + image, chosen =
the faithful description, rejected = the flagged one). The base is loaded with
``AutoProcessor`` + ``AutoModelForImageTextToText``; every image is opened and
decoded by Pillow before anything loads (a missing or unreadable file fails
the run, naming the file and the row: no pair is dropped); TRL's DPOTrainer
gets the processor as ``processing_class`` and decodes the pictures batch by
batch. The LoRA goes on the language model only (``target_modules`` short
names, default peft's for the text architecture, matched under the language
model's module path); a ``target_modules`` *string* is a regex passed to peft
verbatim, which may include the vision tower or projector. A file holding both
text and vision pairs is refused. The adapter is an arm's ``adapter:`` on a
``task: vision`` transformers target of the same base
(``ableaudit.backends.transformers_vlm``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ableaudit.adapters.registry import AdapterRecord, adapters_root, register_adapter, staging_dir
from ableaudit.keys import model_fingerprint, resolve_builtin
from ableaudit.media import MAX_IMAGE_BYTES_ENV, file_sha256, max_image_bytes


class DPOTrainError(ValueError):
    """DPO training cannot start; the message names the input and the fix."""


@dataclass
class DPOTrainConfig:
    model: str  # HF id, local folder, or builtin:smollm2
    data: str  # an export folder (train.jsonl / train.parquet) or one such file
    name: str = "dpo"  # adapter family: ids are <name>-v<version>
    revision: str | None = None
    max_steps: int = 100  # optimiser steps (-1: run `epochs` epochs)
    epochs: float = 1.0
    batch_size: int = 2
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-5
    beta: float = 0.1  # DPO temperature: how far the policy may move from the reference
    loss_type: str = "sigmoid"  # TRL's DPO loss (the paper's DPO objective)
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: list[str] | str | None = (
        None  # default: peft's choice for the architecture (q_proj, v_proj);
    )
    #   vision: short names are matched in the language model only; a str is a regex given to peft verbatim
    max_length: int = 1024  # prompt + response tokens (TRL truncates longer examples)
    device: str = "auto"  # auto | cpu | cuda
    dtype: str | None = None  # None: float32 on CPU, bfloat16 on GPU
    gradient_checkpointing: bool = False
    seed: int = 0
    logging_steps: int = 1
    adapters_root: str | None = None


@dataclass
class DPOTrainResult:
    adapter: AdapterRecord
    metrics: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def adapter_id(self) -> str:
        return self.adapter.adapter_id

    def arm_snippet(self) -> str:
        return arm_snippet(self.adapter, self.metrics.get("task", "text"))

    def summary(self) -> str:
        m = self.metrics
        kind = " vision" if m.get("task") == "vision" else ""
        return (
            f"registered {self.adapter.adapter_id} (DPO LoRA) at {self.adapter.path}\n"
            f"  base {self.adapter.base_model}; {m['n_train']}{kind} preference pairs; {m['steps']} steps in "
            f"{self.timings.get('train_seconds')} s; loss {m.get('first_loss')} -> {m.get('last_loss')}; "
            f"reward accuracy (last step) {m.get('last_reward_accuracy')}\n"
            "Use it as an arm of a transformers target on the same base:\n" + self.arm_snippet()
        )


def arm_snippet(adapter: AdapterRecord, task: str = "text") -> str:
    """The audit-config lines that run a DPO adapter as an arm beside the base and a prompt mitigation."""
    return (
        "arms:\n"
        "  - name: baseline\n"
        f"  - name: {adapter.name.replace('-', '_')}\n"
        f"    adapter: {adapter.path}\n"
        "targets:\n"
        "  - name: <your target>\n"
        + ("    task: vision\n" if task == "vision" else "")
        + "    backend: transformers\n"
        f"    model: {adapter.base_model}\n"
    )


def materialize_base(model: str, root: str | os.PathLike | None = None) -> str:
    """A transformers-loadable reference for ``model``; a builtin GGUF is de-quantised into a folder once."""
    gguf = resolve_builtin(model)
    if gguf is None:
        p = Path(model).expanduser()
        if p.exists():
            return str(p.resolve())
        if model.startswith((".", "/", "~")):
            raise DPOTrainError(f"model path {model!r} does not exist")
        return model
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ableaudit.keys import BUILTIN_MODELS

    dist = BUILTIN_MODELS[model][0].replace("_", "-")
    out = adapters_root(root) / "base" / f"{model.split(':', 1)[1]}-{metadata.version(dist)}"
    if (out / "config.json").is_file():
        return str(out)
    tmp = out.with_name(out.name + ".tmp")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    lm = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # transformers de-quantises GGUF tensors to float32 on load but keeps marking the model as "gguf quantized",
    # which forbids saving it: the weights in memory are plain floats, so drop the mark and save them.
    lm.hf_quantizer = None
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    if hasattr(lm, "is_quantized"):
        lm.is_quantized = False
    lm.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    (tmp / "ableaudit_source.json").write_text(
        json.dumps({"dequantized_from": model, "gguf": str(gguf)})
    )
    tmp.replace(out)
    return str(out)


def _data_file(data: str | os.PathLike) -> Path:
    p = Path(data).expanduser()
    if p.is_dir():
        for name in ("train.jsonl", "train.parquet"):
            if (p / name).is_file():
                return p / name
        raise DPOTrainError(
            f"{p} holds no train.jsonl or train.parquet; run `ableaudit export preference-pairs {p}`"
        )
    if not p.is_file():
        raise DPOTrainError(f"preference data {p} does not exist")
    return p


def _read_rows(f: Path) -> list[dict[str, Any]]:
    if f.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(f).to_pylist()
    return [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


def _is_vision_row(row: dict[str, Any]) -> bool:
    # JSONL text rows have no `images` key; a Parquet file holding both kinds has it as null in text rows
    return row.get("images") is not None


def _image_placeholders(messages: Any) -> int:
    return sum(
        1
        for m in messages or []
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for part in m["content"]
        if isinstance(part, dict) and part.get("type") == "image"
    )


def _row_name(f: Path, i: int, row: dict[str, Any]) -> str:
    pid = row.get("preference_id")
    return f"{f.name} row {i + 1}" + (f" (preference_id {pid})" if pid else "")


def check_images(f: Path, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Resolve and decode every row's images with Pillow; {resolved path: sha256}. Lists every problem, or raises."""
    try:
        from PIL import Image
    except ImportError:
        raise DPOTrainError(
            f"{f} holds vision preference pairs: decoding their images needs Pillow "
            "(pillow in requirements.lock); install it in this environment"
        ) from None
    problems: list[str] = []
    digests: dict[str, str] = {}
    for i, r in enumerate(rows):
        images = r.get("images")
        if not isinstance(images, list) or not images:
            problems.append(
                f"{_row_name(f, i, r)}: `images` is {images!r}, not a list of image paths"
            )
            continue
        n_slots = _image_placeholders(r.get("prompt"))
        if n_slots != len(images):
            problems.append(
                f"{_row_name(f, i, r)}: {len(images)} images but {n_slots} image parts in the prompt"
            )
        resolved = []
        for ref in images:
            p = Path(str(ref)).expanduser()
            if not p.is_absolute():
                p = f.parent / p  # a relative path is read from the data file's folder
            resolved.append(str(p))
            if str(p) in digests:
                continue
            if not p.is_file():
                problems.append(f"{_row_name(f, i, r)}: image {p} does not exist")
                continue
            size, cap = p.stat().st_size, max_image_bytes()
            if size > cap:  # checked before PIL reads a byte of it
                problems.append(
                    f"{_row_name(f, i, r)}: image {p} is {size:,} bytes, over the cap of "
                    f"{cap:,}; shrink it, or raise the cap with the environment variable "
                    f"{MAX_IMAGE_BYTES_ENV}"
                )
                continue
            try:
                with Image.open(p) as im:
                    im.load()
            except Exception as e:  # noqa: BLE001 - PIL raises several kinds for a bad file
                problems.append(
                    f"{_row_name(f, i, r)}: image {p} cannot be decoded ({type(e).__name__}: {e})"
                )
                continue
            digests[str(p)] = file_sha256(p)
        r["images"] = resolved
    if problems:
        shown = "\n  ".join(problems[:20]) + (
            f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        )
        raise DPOTrainError(
            f"{len(problems)} problem(s) with the images of {f}; nothing was trained:\n  {shown}\n"
            "Fix: restore the files, or re-export with image_root= the folder the audit read the images "
            "from (`ableaudit export preference-pairs --task vision --image-root ...`)"
        )
    return digests


def load_preference_dataset(data: str | os.PathLike) -> Any:
    """The train split as a datasets.Dataset (prompt, chosen, rejected; metadata columns dropped).

    Vision pairs keep an ``images`` column (every file checked by ``check_images``, then decoded as RGB by
    ``datasets`` when a batch is built); a file with both text and vision pairs is refused.
    """
    return _load_pairs(_data_file(data))[0]


def _load_pairs(f: Path) -> tuple[Any, dict[str, str] | None]:
    """(dataset, {image path: sha256} for vision pairs, None for text pairs)."""
    from datasets import Dataset

    rows = _read_rows(f)
    if not rows:
        raise DPOTrainError(
            f"{f} has no preference pairs: the judge flagged nothing in the train split "
            "(see preference_pairs and the export's manifest.json)"
        )
    missing = {"prompt", "chosen", "rejected"} - set(rows[0])
    if missing:
        raise DPOTrainError(f"{f} lacks the columns {sorted(missing)} of TRL's preference format")
    n_vision = sum(_is_vision_row(r) for r in rows)
    if 0 < n_vision < len(rows):
        raise DPOTrainError(
            f"{f} mixes {len(rows) - n_vision} text and {n_vision} vision preference pairs: one "
            "adapter trains on one kind. Export them apart (`ableaudit export preference-pairs` with "
            "task text, and with task vision into another folder) and train on one file"
        )
    if not n_vision:
        return Dataset.from_list(
            [{k: r[k] for k in ("prompt", "chosen", "rejected")} for r in rows]
        ), None
    from datasets import Image, List

    digests = check_images(f, rows)
    ds = Dataset.from_list(
        [{k: r[k] for k in ("prompt", "chosen", "rejected", "images")} for r in rows]
    )
    return ds.cast_column("images", List(Image(mode="RGB"))), digests


def language_model_path(model: Any) -> str:
    """The qualified module name of a vision-language model's language model (e.g. ``model.language_model``)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    names = (
        [n for n, m in model.named_modules() if m is decoder and n] if decoder is not None else []
    )
    if not names:
        names = sorted(
            (n for n, _ in model.named_modules() if n.split(".")[-1] == "language_model"), key=len
        )
    if not names:
        raise DPOTrainError(
            f"cannot find the language model inside {type(model).__name__}; pass target_modules as a "
            "regex of the modules to adapt"
        )
    return names[0]


def vision_lora_targets(
    model: Any, target_modules: list[str] | str | None
) -> tuple[str, list[str]]:
    """(peft target_modules regex, the module names it matches): short names under the language model only."""
    if isinstance(target_modules, str):
        pattern = target_modules  # configured: verbatim (may reach the vision tower)
    else:
        names = list(target_modules or [])
        if not names:
            from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING

            text_type = getattr(model.config.get_text_config(), "model_type", None)
            names = list(
                TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING.get(text_type)
                or ["q_proj", "v_proj"]
            )
        prefix = language_model_path(model)
        pattern = rf"^{re.escape(prefix)}\..*\.({'|'.join(re.escape(n) for n in names)})$"
    import torch

    matched = [
        n
        for n, m in model.named_modules()
        if re.fullmatch(pattern, n) and isinstance(m, torch.nn.Linear)
    ]
    if not matched:
        raise DPOTrainError(
            f"target_modules {target_modules!r} match no linear layer of {type(model).__name__} "
            f"(pattern {pattern!r})"
        )
    return pattern, matched


def _load_vlm(base: str, cfg: DPOTrainConfig, dtype: Any, local_only: bool) -> tuple[Any, Any]:
    """(processor, model) of a vision-language base, the processor checked on a probe picture."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from ableaudit.backends.transformers_vlm import processor_problem

    try:
        proc = AutoProcessor.from_pretrained(
            base, revision=cfg.revision, local_files_only=local_only
        )
        vlm = AutoModelForImageTextToText.from_pretrained(
            base, revision=cfg.revision, local_files_only=local_only, dtype=dtype
        )
    except (OSError, ValueError) as e:
        raise DPOTrainError(
            f"cannot load {cfg.model!r} as a vision-language model (AutoProcessor + "
            f"AutoModelForImageTextToText), which its vision preference pairs need: {e}\nFix: a local "
            "VLM checkpoint folder (config, weights, tokenizer, preprocessor_config.json), an HF id in "
            "the local cache, or ABLEAUDIT_ALLOW_DOWNLOAD=1"
        ) from None
    tok = getattr(proc, "tokenizer", None)
    if not getattr(proc, "chat_template", None) and getattr(tok, "chat_template", None):
        proc.chat_template = tok.chat_template
    if not getattr(proc, "chat_template", None):
        raise DPOTrainError(
            f"{cfg.model!r} has no chat template; the conversational preference data needs one"
        )
    problem = processor_problem(proc, vlm.config, proc.chat_template)
    if problem:
        raise DPOTrainError(
            f"the processor of {cfg.model!r} is incomplete: {problem}\nFix: complete the checkpoint's "
            "processor files (preprocessor_config.json; for LLaVA also processor_config.json with "
            "patch_size, vision_feature_select_strategy and num_additional_image_tokens)"
        )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return proc, vlm


def train_dpo(warehouse: str | os.PathLike | None, cfg: DPOTrainConfig) -> DPOTrainResult:
    """Fine-tune a LoRA with TRL's DPOTrainer on the exported train split; register it (kind 'dpo').

    Text pairs train a causal LM; vision pairs (images) a vision-language model, its LoRA on the language model.
    """
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    timings: dict[str, float] = {}
    t = time.perf_counter()
    data_file = _data_file(cfg.data)
    dataset, image_digests = _load_pairs(data_file)
    vision = image_digests is not None
    if vision and resolve_builtin(cfg.model) is not None:
        raise DPOTrainError(
            f"{data_file} holds vision preference pairs but {cfg.model!r} is a text model; "
            "train them on the audited vision-language model (a VLM checkpoint folder or HF id)"
        )
    base = materialize_base(cfg.model, cfg.adapters_root)
    device = (
        "cuda"
        if cfg.device == "auto" and torch.cuda.is_available()
        else ("cpu" if cfg.device == "auto" else cfg.device)
    )
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DPOTrainError(f"device {cfg.device!r} requested but torch sees no CUDA GPU")
    dtype_name = cfg.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    local_only = os.environ.get("ABLEAUDIT_ALLOW_DOWNLOAD") != "1"
    lora_targets: list[str] | str | None = cfg.target_modules
    lora_modules: list[str] | None = None
    if vision:
        tok, lm = _load_vlm(base, cfg, getattr(torch, dtype_name), local_only)
        lora_targets, lora_modules = vision_lora_targets(lm, cfg.target_modules)
    else:
        try:
            tok = AutoTokenizer.from_pretrained(
                base, revision=cfg.revision, local_files_only=local_only
            )
            lm = AutoModelForCausalLM.from_pretrained(
                base,
                revision=cfg.revision,
                local_files_only=local_only,
                dtype=getattr(torch, dtype_name),
            )
        except (OSError, ValueError) as e:
            raise DPOTrainError(
                f"cannot load {cfg.model!r} as a causal LM: {e}\nFix: a local checkpoint folder, an HF "
                "id in the local cache, or ABLEAUDIT_ALLOW_DOWNLOAD=1"
            ) from None
        if not getattr(tok, "chat_template", None):
            raise DPOTrainError(
                f"{cfg.model!r} has no chat template; the conversational preference data needs one"
            )
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
    timings["load_seconds"] = round(time.perf_counter() - t, 3)

    out = staging_dir("dpo", cfg.adapters_root)
    args = DPOConfig(
        output_dir=str(out / "trainer"),
        max_steps=cfg.max_steps,
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate,
        beta=cfg.beta,
        loss_type=[cfg.loss_type],
        max_length=cfg.max_length,
        logging_steps=cfg.logging_steps,
        save_strategy="no",
        report_to="none",
        seed=cfg.seed,
        use_cpu=device == "cpu",
        bf16=dtype_name == "bfloat16",
        fp16=dtype_name == "float16",
        gradient_checkpointing=cfg.gradient_checkpointing,
        disable_tqdm=True,
        dataloader_pin_memory=False,
    )
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=lora_targets,
        task_type="CAUSAL_LM",
    )
    try:
        trainer = DPOTrainer(
            model=lm, args=args, train_dataset=dataset, processing_class=tok, peft_config=lora
        )
        t = time.perf_counter()
        result = trainer.train()
    except BaseException:
        import shutil

        shutil.rmtree(out, ignore_errors=True)  # nothing half-trained stays under the adapters root
        raise
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    timings["train_seconds"] = round(time.perf_counter() - t, 3)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    adapter_dir = out / "adapter"
    trainer.model.save_pretrained(str(adapter_dir))
    (adapter_dir / "ableaudit_dpo.json").write_text(
        json.dumps(
            {"base_model": base, "model": cfg.model, "task": "vision" if vision else "text"},
            indent=2,
        )
    )
    steps = int(result.global_step)
    metrics = {
        "n_train": len(dataset),
        "steps": steps,
        "first_loss": logs[0]["loss"] if logs else None,
        "last_loss": logs[-1]["loss"] if logs else None,
        "last_reward_accuracy": logs[-1].get("rewards/accuracies") if logs else None,
        "last_reward_margin": logs[-1].get("rewards/margins") if logs else None,
        "train_loss": result.training_loss,
        "device": device,
        "dtype": dtype_name,
        "steps_per_second": round(steps / timings["train_seconds"], 4)
        if timings["train_seconds"]
        else None,
        "log_history": logs[-50:],
        "trl_version": metadata.version("trl"),
        "task": "vision" if vision else "text",
    }
    if vision:
        metrics.update(
            lora_target_modules=lora_targets,
            n_lora_modules=len(lora_modules or []),
            n_images=len(image_digests or {}),
        )
    timings["load_seconds"] = timings.get("load_seconds", 0.0)
    del trainer, lm
    import shutil

    shutil.rmtree(out / "trainer", ignore_errors=True)
    snapshot = {
        "sha256": file_sha256(data_file),
        "n_rows": len(dataset),
        "file": str(data_file),
        "task": "vision" if vision else "text",
    }
    if vision:  # the file holds paths: the pictures' bytes are part of the data too
        lines = "\n".join(f"{p}\t{d}" for p, d in sorted((image_digests or {}).items()))
        snapshot.update(
            n_images=len(image_digests or {}),
            images_sha256=hashlib.sha256(lines.encode()).hexdigest(),
            image_digests=sorted(set((image_digests or {}).values())),  # mitigation_effect: unseen
        )
    manifest = data_file.parent / "manifest.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        snapshot.update(
            judge=m.get("judge"), warehouse=m.get("warehouse"), heldout_share=m.get("heldout_share")
        )
    record = register_adapter(
        warehouse,
        kind="dpo",
        name=cfg.name,
        files=adapter_dir,
        base_model=base,
        base_fingerprint=model_fingerprint(base, cfg.revision),
        data_snapshot=snapshot,
        split={"train_file": str(data_file), "heldout_share": snapshot.get("heldout_share")},
        metrics={**metrics, "timings": timings},
        params=asdict(cfg),
        root=cfg.adapters_root,
    )
    shutil.rmtree(out, ignore_errors=True)
    return DPOTrainResult(adapter=record, metrics=metrics, timings=timings)
