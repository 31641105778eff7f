"""llama.cpp decode speed by thread count, on an idle machine and on one whose cores are busy.

llama.cpp's threads wait on each other at every step: when another process
holds a core, a thread count that counts that core stalls the whole decode.
This prints tokens per second for each thread count with and without CPU
burners beside it, and the ratio of each row to one thread on the idle
machine, so the backend's default can be chosen from numbers.

    .venv/bin/python bench/llamacpp_threads.py [--tokens 64] [--prompts 3] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time


def _burn(stop: mp.Event) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1_000_003


def _measure(n_threads: int, n_tokens: int, n_prompts: int) -> float:
    from ableaudit.backends import make_backend
    from ableaudit.config import Target
    from ableaudit.records import GenerationRequest

    target = Target(
        name="bench",
        backend="llamacpp",
        model="builtin:smollm2",
        batch_size=1,
        decoding={"max_new_tokens": n_tokens, "seed": 0, "temperature": 0.0},
        options={"n_ctx": 1024, "n_threads": n_threads},
    )
    backend = make_backend(target)
    try:
        requests = [
            GenerationRequest(
                key=f"k{i}",
                messages=({"role": "user", "content": f"Tell me about topic {i}."},),
                temperature=0.0,
                max_new_tokens=n_tokens,
                seed=0,
            )
            for i in range(n_prompts)
        ]
        backend.generate(requests[:1])  # warm-up
        start = time.perf_counter()
        results = backend.generate(requests)
        elapsed = time.perf_counter() - start
    finally:
        backend.close()
    tokens = sum(r.completion_tokens or 0 for r in results)
    return tokens / elapsed if elapsed > 0 else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64, help="tokens generated per prompt")
    ap.add_argument("--prompts", type=int, default=3, help="prompts per measurement")
    ap.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="thread counts to compare"
    )
    ap.add_argument(
        "--burners",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="busy processes beside the decode in the loaded rows (default: one per core)",
    )
    args = ap.parse_args()

    print(
        f"cores available to this process: {len(os.sched_getaffinity(0))}; load average: {os.getloadavg()}"
    )
    rows = []
    for loaded in (False, True):
        stop = mp.Event()
        burners = [
            mp.Process(target=_burn, args=(stop,), daemon=True)
            for _ in range(args.burners if loaded else 0)
        ]
        for b in burners:
            b.start()
        try:
            for n in args.threads:
                rows.append((loaded, n, _measure(n, args.tokens, args.prompts)))
        finally:
            stop.set()
            for b in burners:
                b.join()
    base = next(tps for loaded, n, tps in rows if not loaded and n == args.threads[0])
    print(f"\n{'machine':<22}{'n_threads':>10}{'tok/s':>10}{'ratio':>8}")
    for loaded, n, tps in rows:
        machine = f"{args.burners} busy processes" if loaded else "idle"
        print(f"{machine:<22}{n:>10}{tps:>10.1f}{tps / base:>8.2f}x")


if __name__ == "__main__":
    main()
