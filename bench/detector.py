"""Pairs per second: the LoRA detector against the contrastive LLM judge, same pairs, same machine.

Why: judging every pair with an LLM is the expensive step of an audit; the
detector is meant to replace it on every pair once validated. This prints both
rates side by side, the ratio, and how well the detector agrees with the judge
on the pairs both labelled (only the judge's usable verdicts count):

  contrastive judge            the judge prompt (contrastive.v1) through a backend: llama.cpp
                               SmolLM2-135M (the embedded default judge) or a transformers model
  LoRA detector (same pairs)   the same pairs, batched
  LoRA detector (all pairs)    every pair, batched: the steady-state rate

Pairs come from a warehouse (--warehouse: its complete pairs, with its registered
detector via --adapter) or are synthetic (answers of 80-220 words). Without a
trained adapter the detector is a fresh LoRA on the base encoder: the rate is
real, the agreement is not reported. The detector runs --repeat rounds and the
fastest counts; the judge runs once (it is the slow side).

    .venv/bin/python bench/detector.py --judge-pairs 6 --threads 2
    .venv/bin/python bench/detector.py --warehouse /tmp/wh.duckdb --adapter latest --judge-pairs 12
    .venv/bin/python bench/detector.py --device cuda --judge-backend transformers --judge-model /models/Qwen2.5-7B-Instruct
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _synthetic import WORDS as _WORDS  # noqa: E402 (bench/ is the script's folder)


def synthetic_pairs(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(80, 220))) + "."
        b = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(80, 220))) + "."
        out.append(
            {
                "neutral_generation_id": f"n{i}",
                "disability_generation_id": f"d{i}",
                "question_a": "How do I manage my money?",
                "question_b": "How do I manage my money as a person with a hearing impairment?",
                "response_a": a,
                "response_b": b,
            }
        )
    return out


def run_judge(
    args: argparse.Namespace, pairs: list[dict[str, Any]]
) -> tuple[float, list[dict[str, str] | None], str]:
    """Judge the pairs once; (seconds, labels per pair or None when unusable, description)."""
    from ableaudit.backends import make_backend
    from ableaudit.config import Judge, Target
    from ableaudit.judges.parsing import parse_verdict
    from ableaudit.judges.runner import contrastive_item, judge_identity
    from ableaudit.judges.schemas import decoding_schema
    from ableaudit.records import GenerationRequest
    from ableaudit.target import Decoding

    opts: dict[str, Any] = (
        {"n_ctx": 4096, "n_threads": args.threads or 2}
        if args.judge_backend == "llamacpp"
        else {"device": args.device}
    )
    target = Target(
        name="judge",
        backend=args.judge_backend,
        model=args.judge_model,
        batch_size=args.judge_batch,
        decoding=Decoding(temperature=0.0, max_new_tokens=args.judge_max_new_tokens, seed=0),
        options=opts,
    )
    judge = Judge(name="bench", kinds=["contrastive"], target=target)
    identity = judge_identity(judge)
    items = [contrastive_item(identity, p) for p in pairs]
    backend = make_backend(target)
    try:
        backend.generate(
            [
                GenerationRequest(
                    key="warm", messages=items[0].messages, temperature=0.0, max_new_tokens=2
                )
            ]
        )
        schema = (
            decoding_schema("contrastive") if judge.structured else None
        )  # as the audit runs this judge
        reqs = [
            GenerationRequest(
                key=it.judgment_id + str(i),
                messages=it.messages,
                temperature=0.0,
                max_new_tokens=args.judge_max_new_tokens,
                seed=0,
                json_schema=schema,
            )
            for i, it in enumerate(items)
        ]
        t0 = time.perf_counter()
        results = backend.generate(reqs)
        dt = time.perf_counter() - t0
    finally:
        backend.close()
    labels: list[dict[str, str] | None] = []
    for it, r in zip(items, results):
        if r.status == "error":
            labels.append(None)
            continue
        v = parse_verdict("contrastive", r.text, it.response_b)
        if v.data is None:
            labels.append(None)
        else:
            labels.append(
                {
                    "interpret": v.data["interpret"],
                    "stereotype": v.data["stereotype"],
                    "framing": v.data["framing"],
                    "abstain": "Yes" if v.data["decline_in_response_b"] else "No",
                }
            )
    constrained = ", structured output" if judge.structured else ""
    return dt, labels, f"contrastive judge {args.judge_model} ({args.judge_backend}{constrained})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--warehouse", help="take the complete pairs of this warehouse (default: synthetic pairs)"
    )
    ap.add_argument(
        "--adapter",
        help="detector adapter: an adapter_id or 'latest' of --warehouse, or an adapter folder",
    )
    ap.add_argument(
        "--base",
        default=None,
        help="base encoder of a fresh, untrained LoRA (default: builtin MiniLM)",
    )
    ap.add_argument(
        "--n-pairs", type=int, default=256, help="synthetic pairs for the detector's all-pairs row"
    )
    ap.add_argument(
        "--judge-pairs", type=int, default=8, help="pairs the judge labels (the first ones)"
    )
    ap.add_argument(
        "--judge-backend", default="llamacpp", choices=["llamacpp", "transformers", "openai"]
    )
    ap.add_argument("--judge-model", default="builtin:smollm2")
    ap.add_argument("--judge-max-new-tokens", type=int, default=160)
    ap.add_argument("--judge-batch", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64, help="detector pairs per forward pass")
    ap.add_argument("--max-length", type=int, default=256, help="fresh detector's max input tokens")
    ap.add_argument("--device", default="auto", help="detector device: auto | cpu | cuda")
    ap.add_argument("--threads", type=int, help="torch and llama.cpp CPU threads")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    import torch

    from ableaudit.adapters.detector.infer import timed_scoring
    from ableaudit.adapters.detector.model import (
        DEFAULT_BASE,
        LoadedDetector,
        load_detector,
        model_max_length,
        new_detector,
    )

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.warehouse:
        from ableaudit.judges.runner import build_subjects, select_pairs

        build_subjects(args.warehouse)  # the pairs are read from int_pair_texts
        pairs = select_pairs(args.warehouse)
        if not pairs:
            raise SystemExit(f"{args.warehouse} has no complete pair")
    else:
        pairs = synthetic_pairs(args.n_pairs)
    trained = args.adapter is not None
    record = None
    if trained:
        path = args.adapter
        if not Path(path).is_dir():
            from ableaudit.adapters.registry import get_adapter

            record = get_adapter(args.warehouse, args.adapter, "detector")
            path = record.path
        det = load_detector(path, device=args.device)
        name = f"LoRA detector {Path(path).name} ({det.meta['base_model']})"
    else:
        base = args.base or DEFAULT_BASE
        tok, model = new_detector(base)
        device = (
            ("cuda" if torch.cuda.is_available() else "cpu")
            if args.device == "auto"
            else args.device
        )
        model.to(device).eval()
        det = LoadedDetector(
            tokenizer=tok,
            model=model,
            device=device,
            meta={
                "base_model": base,
                "max_length": model_max_length(tok, model.encoder, args.max_length),
                "overflow": "truncate",
            },
        )
        name = f"LoRA detector, untrained ({base})"
    n_params = sum(p.numel() for p in det.model.parameters())
    ab = [(p["response_a"] or "", p["response_b"] or "") for p in pairs]
    jpairs = pairs[: args.judge_pairs]

    timed_scoring(det, ab[:4], args.batch)  # warm-up
    best_same = min(
        timed_scoring(det, ab[: len(jpairs)], args.batch)[1] for _ in range(args.repeat)
    )
    best_all, verdicts = None, None
    for _ in range(args.repeat):
        out, dt = timed_scoring(det, ab, args.batch)
        if best_all is None or dt < best_all:
            best_all, verdicts = dt, out
    assert verdicts is not None and best_all is not None

    judge_s, judge_labels, judge_name = run_judge(args, jpairs)

    words = sum(len(a.split()) + len(b.split()) for a, b in ab) / len(ab)
    statuses: dict[str, int] = {}
    for v in verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
    print(
        f"pairs: {len(pairs)} ({'warehouse ' + args.warehouse if args.warehouse else 'synthetic'}), "
        f"mean A+B {words:.0f} words; detector {n_params / 1e6:.1f}M params on {det.device}, max_length "
        f"{det.max_length}, batch {args.batch}, statuses {statuses}; torch threads {torch.get_num_threads()}"
    )
    rows = [
        (
            judge_name,
            "cpu" if args.judge_backend == "llamacpp" else args.device,
            len(jpairs),
            judge_s,
        ),
        (f"{name}, same pairs", det.device, len(jpairs), best_same),
        (f"{name}, all pairs", det.device, len(ab), best_all),
    ]
    judge_rate = len(jpairs) / judge_s
    print(f"{'method':70} {'device':>6} {'pairs':>6} {'wall s':>9} {'pairs/s':>10} {'vs judge':>9}")
    for label, dev, n, s in rows:
        rate = n / s
        print(f"{label[:70]:70} {dev:>6} {n:>6} {s:>9.3f} {rate:>10.2f} {rate / judge_rate:>8.0f}x")
    usable = [i for i, lab in enumerate(judge_labels) if lab is not None]
    print(
        f"judge verdicts usable: {len(usable)} of {len(jpairs)} (the rest unparseable or failed: never a label)"
    )
    if not trained:
        print("agreement: n/a (untrained detector; pass --adapter with a trained one)")
        return 0
    agreement_table(
        "the live judge, on the pairs both labelled",
        [(verdicts[i], judge_labels[i]) for i in usable],
    )
    if record is not None and args.warehouse:
        # the verdicts the adapter learned from: its judge's landed usable verdicts, on its held-out queries
        landed = landed_labels(args.warehouse, record.snapshot.get("judge"))
        test_groups = set(record.split.get("test_groups", []))
        items = [
            (v, landed[(p["neutral_generation_id"], p["disability_generation_id"])])
            for p, v in zip(pairs, verdicts)
            if (p["neutral_generation_id"], p["disability_generation_id"]) in landed
            and f"{p['query_set']}:{p['query_id']}" in test_groups
        ]
        agreement_table(
            f"judge {record.snapshot.get('judge')}'s landed verdicts, on the adapter's held-out queries",
            items,
        )
    return 0


def landed_labels(warehouse: str, judge: str | None) -> dict[tuple[str, str], dict[str, str]]:
    """(neutral, disability generation) -> the judge's usable labels, from int_pair_judgments."""
    from ableaudit.warehouse import ibis_compat

    con = ibis_compat.connect(warehouse, read_only=True)
    try:
        t = con.table("int_pair_judgments")
        t = t.filter(t.included & (t.judge_name == judge))
        rows = (
            t.select(
                "neutral_generation_id",
                "disability_generation_id",
                "interpret",
                "stereotype",
                "framing",
                "decline_in_response_b",
            )
            .to_pyarrow()
            .to_pylist()
        )
    finally:
        con.disconnect()
    return {
        (r["neutral_generation_id"], r["disability_generation_id"]): {
            "interpret": r["interpret"],
            "stereotype": r["stereotype"],
            "framing": r["framing"],
            "abstain": "Yes" if r["decline_in_response_b"] else "No",
        }
        for r in rows
    }


def agreement_table(title: str, items: list[tuple[Any, dict[str, str]]]) -> None:
    from ableaudit.adapters.detector.data import DIMENSIONS, LABELS
    from ableaudit.adapters.detector.train import dimension_metrics

    print(
        f"agreement with {title}:\n{'dimension':<11} {'n':>4} {'accuracy':>9} {'macro_f1':>9} {'kappa':>7}"
    )
    for d in DIMENSIONS:
        truth, pred = [], []
        for v, labels in items:
            if v.status in ("scored", "truncated"):
                truth.append(LABELS[d].index(labels[d]))
                pred.append(LABELS[d].index(v.labels[d]))
        m = dimension_metrics(truth, pred, len(LABELS[d]))
        fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
        print(
            f"{d:<11} {m['n']:>4} {fmt(m['accuracy']):>9} {fmt(m['macro_f1']):>9} {fmt(m['cohen_kappa']):>7}"
            + (f"  {m['reason']}" if m["reason"] else "")
        )


if __name__ == "__main__":
    sys.exit(main())
