"""Seconds from `ableaudit audit --config BAD` to its error message, for the mistakes users report.

Each case runs the command in a fresh interpreter (as a user would) and times
the first line on stderr and the exit. The baseline in the same run is a
fresh interpreter that only imports the command line (`import
ableaudit.cli.main`): the ratio says how much of the time is preflight
itself rather than Python starting. Without preflight these mistakes surfaced
after the Prefect server and the dbt build (45-97 s reported on 2 cores).

    .venv/bin/python bench/preflight.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CASES = {
    "typo in a key (batchsize)": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2, batchsize: 4}\n"
    ),
    "unknown backend (llama-cpp)": (
        "targets:\n  - {name: m, backend: llama-cpp, model: builtin:smollm2}\n"
    ),
    "missing GGUF path": ("targets:\n  - {name: m, backend: llamacpp, model: /nowhere/m.gguf}\n"),
    "unreachable base_url (port closed)": (
        "targets:\n  - {name: m, backend: openai, model: m, base_url: 'http://127.0.0.1:PORT/v1'}\n"
    ),
    "server that never answers (the 2 s timeout)": (
        "targets:\n  - {name: m, backend: openai, model: m, base_url: 'http://127.0.0.1:SILENT/v1'}\n"
    ),
}


def time_command(argv: list[str]) -> tuple[float, float, int, str]:
    """(seconds to the first stderr line, seconds to exit, exit status, its stderr)."""
    # a placeholder key, so the unanswered remote server is probed rather than refused for its key
    env = dict(os.environ, OPENAI_API_KEY=os.environ.get("OPENAI_API_KEY", "bench-placeholder"))
    env.pop("OPENAI_BASE_URL", None)
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    first = proc.stderr.readline()
    first_s = time.perf_counter() - start
    rest = proc.stderr.read()
    code = proc.wait()
    return first_s, time.perf_counter() - start, code, first + rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the median is shown")
    args = parser.parse_args()

    baseline = [
        time_command([sys.executable, "-c", "import ableaudit.cli.main"])[1]
        for _ in range(args.repeat)
    ]
    base = statistics.median(baseline)
    print(f"baseline: a fresh interpreter importing the command line: {base:.2f} s\n")
    print(f"{'case':<52} {'first message':>14} {'exit':>8} {'x baseline':>11}  status")
    # a socket that listens and never answers: connections open, then nothing comes back
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    with silent, tempfile.TemporaryDirectory() as tmp:
        for name, text in CASES.items():
            path = Path(tmp) / "audit.yaml"
            text = text.replace("PORT", str(closed_port()))
            path.write_text(text.replace("SILENT", str(silent.getsockname()[1])))
            argv = [sys.executable, "-m", "ableaudit.cli", "audit", "--config", str(path)]
            argv += ["--warehouse", str(Path(tmp) / "wh.duckdb")]
            runs = [time_command(argv) for _ in range(args.repeat)]
            first = statistics.median(r[0] for r in runs)
            total = statistics.median(r[1] for r in runs)
            code = runs[-1][2]
            print(f"{name:<52} {first:>12.2f} s {total:>6.2f} s {first / base:>10.2f}x  {code}")
            print("    " + runs[-1][3].strip().splitlines()[-1][:150])


if __name__ == "__main__":
    main()
