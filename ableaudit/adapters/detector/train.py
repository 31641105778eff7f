"""Training a LoRA detector on the judge's contrastive verdicts, validating it, and registering it.

Steps (the ``train-detector`` flow wires them): load the examples
(``data.load_examples``), split them by query group (no query or image on both
sides), fine-tune a peft LoRA on the base encoder plus four heads with a summed
cross-entropy (class-balanced by default, unlabelled dimensions masked), score
the held-out pairs, and register the adapter in ``raw.adapters`` with its base,
data snapshot, split, metrics and parameters.

Held-out metrics, per dimension (sklearn): accuracy, macro F1 over the
labels that occur (in the reference or the predictions) and Cohen's kappa,
against three references: ``target`` (what it was trained to predict: human
majority where present, else the judge), ``judge`` (the judge's own labels) and
``human`` (only pairs humans rated). A metric that cannot be computed (no item, one class only for kappa)
is null with a reason. After a build, the ``agreement`` mart has the same
comparisons on every pair (rater kind 'detector').
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ableaudit.adapters.detector.data import (
    DIMENSIONS,
    LABELS,
    DetectorDataError,
    Example,
    load_examples,
    split_examples,
)
from ableaudit.adapters.detector.infer import predict_logits
from ableaudit.adapters.detector.model import (
    DEFAULT_BASE,
    OVERFLOW_RULES,
    LoadedDetector,
    base_fingerprint,
    encode,
    model_max_length,
    new_detector,
    resolve_device,
    save_detector,
)
from ableaudit.adapters.registry import AdapterRecord, register_adapter, staging_dir


@dataclass
class DetectorTrainConfig:
    base_model: str = (
        DEFAULT_BASE  # HF id or path of an encoder / small LM, or builtin:all-minilm-l6-v2
    )
    name: str = "detector"  # adapter family: ids are <name>-v<version>
    judge: str | None = None  # contrastive judge whose verdicts are labels (None: the only one)
    query_set: str | None = None  # only pairs of this query / image set
    use_human: bool = True  # human labels override the judge (data.py)
    test_size: float = 0.25  # share of query groups held out
    seed: int = 0
    epochs: int = 3
    max_steps: int | None = None  # stop after this many optimiser steps (tests, smoke runs)
    batch_size: int = 16
    learning_rate: float = 5e-4
    weight_decay: float = 0.0
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    target_modules: list[str] | None = (
        None  # default: peft's choice for the architecture (BERT: query, value)
    )
    max_length: int = 256  # tokens of "A [SEP] B"; capped by the model's own limit
    overflow: str = (
        "truncate"  # longer pairs at inference: 'truncate' (status truncated) | 'skip' (too_long)
    )
    class_weight: str | None = "balanced"  # 'balanced' (inverse class frequency in train) | None
    device: str = "auto"
    eval_batch_size: int = 64
    adapters_root: str | None = None  # default $ABLEAUDIT_ADAPTERS, else <project>/adapters

    def check(self) -> None:
        if self.overflow not in OVERFLOW_RULES:
            raise DetectorDataError(
                f"overflow must be one of {OVERFLOW_RULES}, got {self.overflow!r}"
            )
        if self.class_weight not in (None, "balanced"):
            raise DetectorDataError(
                f"class_weight must be 'balanced' or None, got {self.class_weight!r}"
            )
        for f in ("epochs", "batch_size", "lora_r", "max_length"):
            if getattr(self, f) < 1:
                raise DetectorDataError(f"{f} must be at least 1, got {getattr(self, f)}")


@dataclass
class DetectorTrainResult:
    adapter: AdapterRecord
    metrics: dict[str, Any]
    split: dict[str, Any]
    snapshot: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def adapter_id(self) -> str:
        return self.adapter.adapter_id

    def summary(self) -> str:
        lines = [
            f"registered {self.adapter.adapter_id} at {self.adapter.path}",
            f"  base {self.adapter.base_model}; {self.snapshot['n_rows']} labelled pairs "
            f"({self.split['n_train']} train / {self.split['n_test']} held out, by query)",
        ]
        for d in DIMENSIONS:
            m = self.metrics["target"][d]
            lines.append(
                f"  {d:<10} n={m['n']:<4} accuracy={_fmt(m['accuracy'])} macro_f1={_fmt(m['macro_f1'])} "
                f"kappa={_fmt(m['cohen_kappa'])}"
                + (f"  ({m['reason']})" if m.get("reason") else "")
            )
        return "\n".join(lines)


def _fmt(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:.3f}"


# --------------------------------------------------------------------------- metrics


def dimension_metrics(
    y_true: Sequence[int], y_pred: Sequence[int], n_classes: int
) -> dict[str, Any]:
    """accuracy, macro F1 (over all the dimension's labels) and Cohen's kappa; null with a reason when undefined."""
    from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score

    n = len(y_true)
    out: dict[str, Any] = {
        "n": n,
        "accuracy": None,
        "macro_f1": None,
        "cohen_kappa": None,
        "reason": None,
    }
    if n == 0:
        out["reason"] = "no labelled item to compare"
        return out
    labels = list(range(n_classes))
    out["accuracy"] = float(accuracy_score(y_true, y_pred))
    # over the labels that occur (in truth or prediction): a label absent from both would add a 0 to the mean
    out["macro_f1"] = float(f1_score(y_true, y_pred, average="macro", zero_division=0))
    if len(set(y_true) | set(y_pred)) < 2:
        out["reason"] = "kappa undefined: one class only"
    else:
        k = float(cohen_kappa_score(y_true, y_pred, labels=labels))
        if math.isnan(k):
            out["reason"] = "kappa undefined"
        else:
            out["cohen_kappa"] = k
    return out


def evaluate(
    examples: Sequence[Example], predicted: Sequence[dict[str, str]]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Metrics per reference ('target', 'judge', 'human') and dimension."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for ref in ("target", "judge", "human"):
        out[ref] = {}
        for d in DIMENSIONS:
            truth, pred = [], []
            for e, p in zip(examples, predicted):
                source = {"target": e.labels, "judge": e.judge_labels, "human": e.human_labels}[ref]
                if source.get(d) is not None:
                    truth.append(LABELS[d].index(source[d]))
                    pred.append(LABELS[d].index(p[d]))
            out[ref][d] = dimension_metrics(truth, pred, len(LABELS[d]))
    return out


# --------------------------------------------------------------------------- training


def _class_weights(examples: Sequence[Example], mode: str | None) -> dict[str, list[float]]:
    weights = {}
    for d in DIMENSIONS:
        k = len(LABELS[d])
        counts = [0] * k
        for e in examples:
            i = e.label_index(d)
            if i >= 0:
                counts[i] += 1
        total = sum(counts)
        if mode == "balanced" and total:
            present = sum(1 for c in counts if c)
            weights[d] = [min(10.0, total / (present * c)) if c else 1.0 for c in counts]
        else:
            weights[d] = [1.0] * k
    return weights


def fit(
    detector: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    cfg: DetectorTrainConfig,
    max_length: int,
    device: str,
) -> dict[str, Any]:
    """The training loop: AdamW on the LoRA and head parameters, summed masked cross-entropy."""
    import torch

    detector.to(device)
    detector.train()
    params = [p for p in detector.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    weights = {
        d: torch.tensor(w, device=device)
        for d, w in _class_weights(examples, cfg.class_weight).items()
    }
    targets = torch.tensor(
        [[e.label_index(d) for d in DIMENSIONS] for e in examples], dtype=torch.long
    )
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    steps, losses = 0, []
    n_truncated = sum(1 for n in _lengths(tokenizer, examples) if n > max_length)
    t0 = time.perf_counter()
    for _epoch in range(cfg.epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for start in range(0, len(order), cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            enc = encode(
                tokenizer,
                [(examples[i].response_a, examples[i].response_b) for i in idx],
                max_length,
            )
            enc = {k: v.to(device) for k, v in enc.items()}
            logits = detector(**enc)
            y = targets[idx].to(device)
            loss = None
            for j, d in enumerate(DIMENSIONS):
                if (y[:, j] >= 0).any():
                    term = torch.nn.functional.cross_entropy(
                        logits[d], y[:, j], weight=weights[d], ignore_index=-100
                    )
                    loss = term if loss is None else loss + term
            if loss is None:
                continue
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            steps += 1
            losses.append(float(loss.detach().cpu()))
            if cfg.max_steps and steps >= cfg.max_steps:
                break
        if cfg.max_steps and steps >= cfg.max_steps:
            break
    detector.eval()
    seconds = time.perf_counter() - t0
    return {
        "steps": steps,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "train_seconds": round(seconds, 3),
        "n_train_truncated": n_truncated,
        "train_pairs_per_second": round(len(examples) * cfg.epochs / seconds, 2)
        if seconds and steps
        else None,
    }


def _lengths(tokenizer: Any, examples: Sequence[Example]) -> list[int]:
    from ableaudit.adapters.detector.model import count_tokens

    return count_tokens(tokenizer, [(e.response_a, e.response_b) for e in examples])


def train_detector(
    warehouse: str | os.PathLike | None = None,
    cfg: DetectorTrainConfig | None = None,
    **overrides: Any,
) -> DetectorTrainResult:
    """Train, validate and register a detector adapter; see the module docstring."""
    cfg = cfg or DetectorTrainConfig()
    if overrides:
        cfg = DetectorTrainConfig(**{**asdict(cfg), **overrides})
    cfg.check()
    timings: dict[str, float] = {}
    t = time.perf_counter()
    data = load_examples(
        warehouse, judge=cfg.judge, query_set=cfg.query_set, use_human=cfg.use_human
    )
    if len(data.examples) < 4:
        source = (
            f"usable verdicts of judge {data.judge!r}"
            if data.judge
            else "no contrastive judge has verdicts here"
        )
        raise DetectorDataError(
            f"only {len(data.examples)} labelled pairs ({source}{'; human labels' if cfg.use_human else ''}; "
            f"{data.counts['n_judged_unusable']} verdicts were unparseable or failed): a detector needs at least 4. "
            "Judge the pairs with a (stronger) contrastive judge, or import its verdicts (`ableaudit import judgments`)"
        )
    train_idx, test_idx, split = split_examples(data.examples, cfg.test_size, cfg.seed)
    train = [data.examples[i] for i in train_idx]
    test = [data.examples[i] for i in test_idx]
    timings["load_seconds"] = round(time.perf_counter() - t, 3)

    device = resolve_device(cfg.device)
    tokenizer, detector = new_detector(
        cfg.base_model,
        lora_r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=cfg.target_modules,
        seed=cfg.seed,
    )
    max_length = model_max_length(tokenizer, detector.encoder, cfg.max_length)
    training = fit(detector, tokenizer, train, cfg, max_length, device)
    timings["train_seconds"] = training["train_seconds"]

    meta = {
        "base_model": cfg.base_model,
        "labels": {d: list(LABELS[d]) for d in DIMENSIONS},
        "max_length": max_length,
        "overflow": cfg.overflow,
        "pooling": "mean",
        "input": "response A [SEP] response B",
    }
    loaded = LoadedDetector(tokenizer=tokenizer, model=detector, meta=meta, device=device)
    t = time.perf_counter()
    probs = predict_logits(
        loaded, [(e.response_a, e.response_b) for e in test], cfg.eval_batch_size
    )
    predicted = [
        {d: LABELS[d][max(range(len(p[d])), key=p[d].__getitem__)] for d in DIMENSIONS}
        for p in probs
    ]
    timings["eval_seconds"] = round(time.perf_counter() - t, 3)
    metrics = {**evaluate(test, predicted), "training": training, "device": device}

    staging = staging_dir("detector", cfg.adapters_root)
    save_detector(detector, staging, meta)
    snapshot = data.snapshot()
    record = register_adapter(
        warehouse,
        kind="detector",
        name=cfg.name,
        files=staging,
        base_model=cfg.base_model,
        base_fingerprint=base_fingerprint(cfg.base_model),
        data_snapshot=snapshot,
        split=split,
        metrics=metrics,
        params={**asdict(cfg), "max_length_effective": max_length},
        root=cfg.adapters_root,
    )
    return DetectorTrainResult(
        adapter=record, metrics=metrics, split=split, snapshot=snapshot, timings=timings
    )
