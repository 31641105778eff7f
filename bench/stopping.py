"""How long `ableaudit audit` takes to stop on Ctrl-C or SIGTERM while llama.cpp is generating,
against how long one answer takes in the same run.

Runs the default audit (SmolLM2 on CPU through llama.cpp, 256 new tokens at most) on a
temporary warehouse without the build, waits for the first landed batch, sends the signal
while the next answers are mid-generation, and prints: the seconds from the signal to the
exit, the seconds one answer took on average before it (from the audit's own rate), their
ratio, the exit status, and what the run landed.

    .venv/bin/python bench/stopping.py [--config configs/default.yaml] [--signal INT TERM]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(config: Path, signum: int, folder: Path) -> dict[str, object]:
    wh = folder / f"bench-{signum}.duckdb"
    cmd = [sys.executable, "-m", "ableaudit.cli", "audit", "--config", str(config)]
    cmd += ["--warehouse", str(wh), "--no-build"]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    landed = threading.Event()
    lines: list[str] = []
    rate: list[float] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if m := re.search(r"landed, ([\d.]+) answers/s", line):
                rate.append(float(m.group(1)))
                landed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not landed.wait(timeout=1800):
        proc.kill()
        raise SystemExit("no batch landed within 30 min:\n" + "".join(lines[-20:]))
    time.sleep(2.0)  # the next answers are now mid-generation
    sent = time.perf_counter()
    os.killpg(proc.pid, signum)
    status = proc.wait(timeout=600)
    took = time.perf_counter() - sent
    reader.join(timeout=5)
    stopped = next((ln.strip() for ln in lines if ln.startswith("ableaudit: stopped")), "")
    return {
        "signal": signal.Signals(signum).name,
        "stop_s": took,
        "answer_s": 1 / rate[0],
        "status": status,
        "message": stopped,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    parser.add_argument("--signal", nargs="+", default=["INT", "TERM"], choices=["INT", "TERM"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ableaudit-bench-stop-") as tmp:
        print(f"{'signal':<8}{'stop s':>8}{'s/answer':>10}{'ratio':>8}{'exit':>6}")
        for name in args.signal:
            r = _run(args.config, getattr(signal, f"SIG{name}"), Path(tmp))
            ratio = r["stop_s"] / r["answer_s"]
            print(
                f"{r['signal']:<8}{r['stop_s']:>8.2f}{r['answer_s']:>10.2f}{ratio:>8.2f}"
                f"{r['status']:>6}   {r['message']}"
            )


if __name__ == "__main__":
    main()
