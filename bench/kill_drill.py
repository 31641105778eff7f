"""What a kill costs: answers asked again after SIGKILLs of a running audit, against the bound.

Why: a kill (an out-of-memory kill, a pre-empted machine, `kill -9`) must lose only what was
in flight. The openai backend keeps at most `window` requests outstanding (default its
concurrency, `batch_size` x servers) and the audit lands answers in batches of that
concurrency, pulling the next only after landing, so a kill loses at most
window + batch - 1 answers; a resumed run asks for exactly those again.

Each drill runs the audit against a local server that answers in `--delay` seconds and counts
every request, kills it with SIGKILL `--kills` times at seeded random points, resumes it each
time, lets the last run finish, and prints per kill the answers lost against the bound, then the
re-asked answers in all (requests the server received minus prompts) as a ratio to
kills x bound, the duplicates and the prompts never answered (both must be 0).

  driver   the audit's generation step (ableaudit.audit.generating, what the audit-target task
           runs) on synthetic prompts: a start takes seconds
  --cli    the whole `ableaudit audit --no-build` command on the seeded prompts (dbt and
           Prefect included: a start takes tens of seconds)

    .venv/bin/python bench/kill_drill.py
    .venv/bin/python bench/kill_drill.py --kills 10 --prompts 120 --batch 4 --seeds 1 2 3
    .venv/bin/python bench/kill_drill.py --cli --kills 3 --per-domain 4
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    from tests.fixtures.kill_drill import drill

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=8, help="kills per drill (default 8)")
    ap.add_argument("--prompts", type=int, default=100, help="prompts (driver; default 100)")
    ap.add_argument("--batch", type=int, default=2, help="the target's batch_size (default 2)")
    ap.add_argument("--delay", type=float, default=0.05, help="seconds per answer (default 0.05)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="one drill per seed")
    ap.add_argument("--cli", action="store_true", help="kill the whole `ableaudit audit` command")
    ap.add_argument("--per-domain", type=int, default=4, help="--cli: queries per domain")
    args = ap.parse_args(argv)

    failed = False
    for seed in args.seeds:
        with tempfile.TemporaryDirectory(prefix="ableaudit-kill-drill-") as tmp:
            d = drill(
                Path(tmp),
                kills=args.kills,
                seed=seed,
                prompts=args.prompts,
                batch_size=args.batch,
                delay_s=args.delay,
                kill_after_s=(0.2, 2.0) if args.cli else (0.2, 1.2),
                mode="cli" if args.cli else "driver",
                per_domain=args.per_domain,
            )
        ratio = d.reasked / (len(d.lost) * d.bound) if d.lost else 0.0
        ok = (
            d.duplicates == 0
            and d.unasked == 0
            and d.answered == d.prompts
            and all(lost <= d.bound for lost in d.lost)
        )
        failed |= not ok
        print(f"seed {seed}: {d.report()}")
        print(
            f"  re-asked / (kills x bound) = {d.reasked}/{len(d.lost) * d.bound} = {ratio:.2f}x "
            f"(at most 1.00x); kills mid-run {sum(d.killed_alive)}/{len(d.killed_alive)}; "
            f"{'ok' if ok else 'FAILED'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
