"""How long the default model's answers are when nothing cuts them off, to choose ``max_new_tokens``.

A cap the model reaches cuts answers mid-sentence: the cut-off answer is
shorter than the model meant it to be, so verbosity leaves such a pair out
and the other metrics score a fragment. This plans the audit of a config
exactly as ``ableaudit audit`` would (same prompts, system prompt,
temperature and seed), draws a seeded sample of its generations across
domains and both sides of a pair (per domain: one neutral prompt and the
rest disability prompts of distinct categories), answers them with a high
cap, and prints the answer length percentiles in tokens and, for each
candidate cap, the share of answers that end by themselves below it
(finish_reason 'stop' with fewer tokens than the cap: an answer of exactly
the cap's length is cut off at that cap). An answer that reaches the high
cap itself counts as ending under no candidate.

The prompts come from ``--warehouse`` (its ``int_prompts``), or from a
temporary warehouse that the script builds from the seeds first (about a
minute). One llama.cpp thread by default: on a machine whose cores are busy,
more threads stall each other (bench/llamacpp_threads.py). Stopped with
Ctrl-C, it summarises the answers it has; ``--from-log`` summarises the answer
lines of a saved run's output without generating.

    nice -n 5 .venv/bin/python bench/answer_lengths.py [--config configs/default.yaml] \
        [--sample 24] [--max-tokens 2048] [--caps 256 512 768 1024] [--threads 1]
    .venv/bin/python bench/answer_lengths.py --from-log lengths.out
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _config(path: Path, max_tokens: int, threads: int) -> Any:
    """The config with its text targets' cap raised and their threads pinned (validated as usual)."""
    from ableaudit.config import parse_config

    data = yaml.safe_load(path.read_text())
    for target in data.get("targets", []):
        if target.get("task", "text") != "text":
            continue
        decoding = dict(target.get("decoding") or {})
        decoding["max_new_tokens"] = max_tokens
        target["decoding"] = decoding
        options = dict(target.get("options") or {})
        options["n_threads"] = threads
        # the window holds the prompt and the answer: keep room for the prompt above the cap
        options["n_ctx"] = max(int(options.get("n_ctx", 0)), max_tokens + 512)
        target["options"] = options
    return parse_config(data, str(path))


def _prompts(cfg: Any, warehouse: str | None) -> list[dict[str, Any]]:
    from ableaudit.audit.planning import audit_task, select_prompts
    from ableaudit.dbt.runner import run_dbt

    if warehouse:
        return select_prompts(warehouse, cfg, "text")
    with tempfile.TemporaryDirectory(prefix="answer-lengths-") as tmp:
        wh = str(Path(tmp) / "prompts.duckdb")
        run_dbt(["seed"], wh)
        run_dbt(["build", "--select", f"+{audit_task(cfg, 'text').table}"], wh)
        return select_prompts(wh, cfg, "text")


def _sample(planned: list[Any], n: int, seed: int) -> list[Any]:
    """Per domain, one neutral generation and disability generations of distinct categories."""
    rng = random.Random(seed)
    by_domain: dict[str, list[Any]] = defaultdict(list)
    for p in planned:
        by_domain[p.domain or ""].append(p)
    domains = sorted(by_domain)
    per_domain = max(2, n // max(len(domains), 1))
    chosen = []
    for domain in domains:
        rows = by_domain[domain]
        neutral = [p for p in rows if p.condition == "neutral"]
        disability = [p for p in rows if p.condition != "neutral"]
        rng.shuffle(neutral)
        rng.shuffle(disability)
        picked = neutral[:1]
        seen: set[str | None] = set()
        for p in disability:
            if len(picked) >= per_domain:
                break
            if p.disability_id not in seen:
                seen.add(p.disability_id)
                picked.append(p)
        chosen.extend(picked)
    return chosen[:n] if len(chosen) > n else chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    ap.add_argument(
        "--warehouse", help="read int_prompts from here (default: build a temporary one)"
    )
    ap.add_argument("--sample", type=int, default=24, help="generations to answer (default 24)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    ap.add_argument("--max-tokens", type=int, default=2048, help="the high cap (default 2048)")
    ap.add_argument("--caps", type=int, nargs="+", default=[256, 512, 768, 1024])
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    ap.add_argument(
        "--from-log",
        type=Path,
        help="print the summary of the answer lines a run printed (e.g. one stopped early), generate nothing",
    )
    args = ap.parse_args()
    if args.from_log:
        print(summary(rows_from_log(args.from_log), args.max_tokens, args.caps))
        return

    from ableaudit.audit.planning import plan_task
    from ableaudit.backends import make_backend

    cfg = _config(args.config, args.max_tokens, args.threads)
    prompts = _prompts(cfg, args.warehouse)
    plans = plan_task(cfg, "text", prompts)
    if not plans:
        sys.exit(f"{args.config} has no text target; nothing to measure")
    plan = plans[0]
    sample = _sample(plan.planned, args.sample, args.seed)
    print(
        f"config {args.config.name}: target {plan.target.name} ({plan.target.model}), "
        f"{len(plan.planned)} planned generations, {len(sample)} sampled "
        f"(seed {args.seed}), cap {args.max_tokens}, {args.threads} thread(s)",
        flush=True,
    )
    backend = make_backend(plan.target)
    rows: list[tuple[int, str | None]] = []
    start = time.perf_counter()
    try:
        for i, p in enumerate(sample, 1):
            (r,) = backend.generate([p.request()])
            if r.error:
                sys.exit(f"generation {p.generation_id} failed: {r.error}")
            rows.append((r.completion_tokens or 0, r.finish_reason))
            print(
                f"  {i:>2}/{len(sample)} {p.domain:<14} {p.condition:<10} "
                f"{p.disability_id or '-':<22} {r.completion_tokens:>5} tokens  {r.finish_reason}"
                f"  ({time.perf_counter() - start:.0f}s)",
                flush=True,
            )
    except KeyboardInterrupt:
        print(f"\nstopped after {len(rows)} of {len(sample)} answers", flush=True)
    finally:
        backend.close()
    print(summary(rows, args.max_tokens, args.caps))


_LOG_LINE = re.compile(r"^\s*\d+/\d+\s.*?\s(\d+) tokens\s+(\S+)")


def rows_from_log(path: Path) -> list[tuple[int, str | None]]:
    """(tokens, finish_reason) of every answer line a run of this script printed."""
    rows = []
    for line in path.read_text().splitlines():
        match = _LOG_LINE.match(line)
        if match:
            rows.append((int(match[1]), None if match[2] == "None" else match[2]))
    if not rows:
        sys.exit(f"{path} holds no answer line of bench/answer_lengths.py")
    return rows


def summary(rows: list[tuple[int, str | None]], max_tokens: int, caps: list[int]) -> str:
    """Percentiles of the answer lengths and, per candidate cap, the share that ends by itself below it."""
    if not rows:
        return "no answer to summarise"
    out = [f"\nanswer length in tokens over {len(rows)} answers (cap {max_tokens}):"]
    out.append(f"{'answers':<22}{'n':>4}{'p50':>7}{'p90':>7}{'p95':>7}{'p99':>7}{'max':>7}")
    ended = [t for t, f in rows if f == "stop"]
    for label, values in (("all", [t for t, _ in rows]), ("ended by themselves", ended)):
        if values:
            v = np.array(values, dtype=float)
            cells = "".join(f"{np.percentile(v, q):>7.0f}" for q in (50, 90, 95, 99))
            out.append(f"{label:<22}{len(v):>4}{cells}{v.max():>7.0f}")
    out.append(f"answers that reached the cap of {max_tokens}: {len(rows) - len(ended)}")
    out.append(f"\n{'cap':>6}{'end by themselves':>20}{'share':>8}")
    for cap in caps:
        n = sum(1 for t in ended if t < cap)
        out.append(f"{cap:>6}{n:>14}/{len(rows):<5}{n / len(rows):>8.0%}")
    return "\n".join(out)


if __name__ == "__main__":
    main()
