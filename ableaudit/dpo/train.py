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
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ableaudit.detector.registry import AdapterRecord, adapters_root, register_adapter, staging_dir
from ableaudit.keys import model_fingerprint, resolve_builtin


class DPOTrainError(ValueError):
    """DPO training cannot start; the message names the input and the fix."""


@dataclass
class DPOTrainConfig:
    model: str                               # HF id, local folder, or builtin:smollm2
    data: str                                # an export folder (train.jsonl / train.parquet) or one such file
    name: str = "dpo"                        # adapter family: ids are <name>-v<version>
    revision: str | None = None
    max_steps: int = 100                     # optimiser steps (-1: run `epochs` epochs)
    epochs: float = 1.0
    batch_size: int = 2
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-5
    beta: float = 0.1                        # DPO temperature: how far the policy may move from the reference
    loss_type: str = "sigmoid"               # TRL's DPO loss (the paper's DPO objective)
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: list[str] | str | None = None   # default: peft's choice for the architecture (q_proj, v_proj)
    max_length: int = 1024                   # prompt + response tokens (TRL truncates longer examples)
    device: str = "auto"                     # auto | cpu | cuda
    dtype: str | None = None                 # None: float32 on CPU, bfloat16 on GPU
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
        return arm_snippet(self.adapter)

    def summary(self) -> str:
        m = self.metrics
        return (f"registered {self.adapter.adapter_id} (DPO LoRA) at {self.adapter.path}\n"
                f"  base {self.adapter.base_model}; {m['n_train']} preference pairs; {m['steps']} steps in "
                f"{self.timings.get('train_seconds')} s; loss {m.get('first_loss')} -> {m.get('last_loss')}; "
                f"reward accuracy (last step) {m.get('last_reward_accuracy')}\n"
                "Use it as an arm of a transformers target on the same base:\n" + self.arm_snippet())


def arm_snippet(adapter: AdapterRecord) -> str:
    """The audit-config lines that run a DPO adapter as an arm beside the base and a prompt mitigation."""
    return (
        "arms:\n"
        "  - name: baseline\n"
        f"  - name: {adapter.name.replace('-', '_')}\n"
        f"    adapter: {adapter.path}\n"
        "targets:\n"
        "  - name: <your target>\n"
        "    backend: transformers\n"
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
    lm = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    lm.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    (tmp / "ableaudit_source.json").write_text(json.dumps({"dequantized_from": model, "gguf": str(gguf)}))
    tmp.replace(out)
    return str(out)


def _data_file(data: str | os.PathLike) -> Path:
    p = Path(data).expanduser()
    if p.is_dir():
        for name in ("train.jsonl", "train.parquet"):
            if (p / name).is_file():
                return p / name
        raise DPOTrainError(f"{p} holds no train.jsonl or train.parquet; run `ableaudit export preference-pairs {p}`")
    if not p.is_file():
        raise DPOTrainError(f"preference data {p} does not exist")
    return p


def load_preference_dataset(data: str | os.PathLike) -> Any:
    """The train split as a datasets.Dataset (prompt, chosen, rejected; metadata columns dropped)."""
    from datasets import Dataset

    f = _data_file(data)
    if f.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(f).to_pylist()
    else:
        rows = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise DPOTrainError(f"{f} has no preference pairs: the judge flagged nothing in the train split "
                            "(see preference_pairs and the export's manifest.json)")
    if any("images" in r for r in rows):
        raise DPOTrainError(f"{f} holds vision preference pairs (images): this trainer fine-tunes text causal LMs; "
                            "train a VLM with TRL's DPOTrainer and its processor on the same file")
    missing = {"prompt", "chosen", "rejected"} - set(rows[0])
    if missing:
        raise DPOTrainError(f"{f} lacks the columns {sorted(missing)} of TRL's preference format")
    return Dataset.from_list([{k: r[k] for k in ("prompt", "chosen", "rejected")} for r in rows])


def _file_sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def train_dpo(warehouse: str | os.PathLike | None, cfg: DPOTrainConfig) -> DPOTrainResult:
    """Fine-tune a LoRA with TRL's DPOTrainer on the exported train split; register it (kind 'dpo')."""
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    timings: dict[str, float] = {}
    t = time.perf_counter()
    data_file = _data_file(cfg.data)
    dataset = load_preference_dataset(data_file)
    base = materialize_base(cfg.model, cfg.adapters_root)
    device = "cuda" if cfg.device == "auto" and torch.cuda.is_available() else ("cpu" if cfg.device == "auto" else cfg.device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DPOTrainError(f"device {cfg.device!r} requested but torch sees no CUDA GPU")
    dtype_name = cfg.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    local_only = os.environ.get("ABLEAUDIT_ALLOW_DOWNLOAD") != "1"
    try:
        tok = AutoTokenizer.from_pretrained(base, revision=cfg.revision, local_files_only=local_only)
        lm = AutoModelForCausalLM.from_pretrained(base, revision=cfg.revision, local_files_only=local_only,
                                                  dtype=getattr(torch, dtype_name))
    except (OSError, ValueError) as e:
        raise DPOTrainError(f"cannot load {cfg.model!r} as a causal LM: {e}\nFix: a local checkpoint folder, an HF id "
                            "in the local cache, or ABLEAUDIT_ALLOW_DOWNLOAD=1") from None
    if not getattr(tok, "chat_template", None):
        raise DPOTrainError(f"{cfg.model!r} has no chat template; the conversational preference data needs one")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    timings["load_seconds"] = round(time.perf_counter() - t, 3)

    out = staging_dir("dpo", cfg.adapters_root)
    args = DPOConfig(
        output_dir=str(out / "trainer"), max_steps=cfg.max_steps, num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate, beta=cfg.beta, loss_type=[cfg.loss_type], max_length=cfg.max_length,
        logging_steps=cfg.logging_steps, save_strategy="no", report_to="none", seed=cfg.seed,
        use_cpu=device == "cpu", bf16=dtype_name == "bfloat16", fp16=dtype_name == "float16",
        gradient_checkpointing=cfg.gradient_checkpointing, disable_tqdm=True, dataloader_pin_memory=False,
    )
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=cfg.target_modules, task_type="CAUSAL_LM")
    trainer = DPOTrainer(model=lm, args=args, train_dataset=dataset, processing_class=tok, peft_config=lora)
    t = time.perf_counter()
    result = trainer.train()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    timings["train_seconds"] = round(time.perf_counter() - t, 3)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    adapter_dir = out / "adapter"
    trainer.model.save_pretrained(str(adapter_dir))
    (adapter_dir / "ableaudit_dpo.json").write_text(json.dumps({"base_model": base, "model": cfg.model}, indent=2))
    steps = int(result.global_step)
    metrics = {
        "n_train": len(dataset), "steps": steps,
        "first_loss": logs[0]["loss"] if logs else None, "last_loss": logs[-1]["loss"] if logs else None,
        "last_reward_accuracy": logs[-1].get("rewards/accuracies") if logs else None,
        "last_reward_margin": logs[-1].get("rewards/margins") if logs else None,
        "train_loss": result.training_loss, "device": device, "dtype": dtype_name,
        "steps_per_second": round(steps / timings["train_seconds"], 4) if timings["train_seconds"] else None,
        "log_history": logs[-50:],
        "trl_version": metadata.version("trl"),
    }
    timings["load_seconds"] = timings.get("load_seconds", 0.0)
    del trainer, lm
    import shutil

    shutil.rmtree(out / "trainer", ignore_errors=True)
    snapshot = {"sha256": _file_sha256(data_file), "n_rows": len(dataset), "file": str(data_file)}
    manifest = data_file.parent / "manifest.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        snapshot.update(judge=m.get("judge"), warehouse=m.get("warehouse"), heldout_share=m.get("heldout_share"))
    record = register_adapter(
        warehouse, kind="dpo", name=cfg.name, files=adapter_dir, base_model=base,
        base_fingerprint=model_fingerprint(base, cfg.revision), data_snapshot=snapshot,
        split={"train_file": str(data_file), "heldout_share": snapshot.get("heldout_share")},
        metrics={**metrics, "timings": timings}, params=asdict(cfg), root=cfg.adapters_root,
    )
    shutil.rmtree(out, ignore_errors=True)
    return DPOTrainResult(adapter=record, metrics=metrics, timings=timings)
