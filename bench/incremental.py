"""What a build costs when little is new: this checkout against a baseline checkout.

For each project (this one, and ``--baseline``, e.g. an export of the commit before
incremental models: ``git archive <commit> | tar -x -C /tmp/base``) it lands the same
synthetic responses (``--models`` models x the built-in query set x ``--samples``
samples, answers drawn from a pool of ``--texts`` distinct texts of ~250 words) and
measures, each step in a fresh process as ``ableaudit build`` runs it (dbt seed +
build):

- the full build,
- a rebuild with nothing new,
- a build after landing one more model (2,340 generations per sample),

as CPU seconds (user + system of the process) and the warehouse file's size after
each. It prints both projects side by side and the ratios to the full build.

    .venv/bin/python bench/incremental.py --baseline /tmp/base
    .venv/bin/python bench/incremental.py --models 2 --samples 1     # this checkout alone
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from _synthetic import WORDS as _WORDS  # noqa: E402 (bench/ is the script's folder)

# one step, run in a fresh interpreter inside the project: argv = step, warehouse, [file]
_STEP = """
import sys
from pathlib import Path
step, wh = sys.argv[1], sys.argv[2]
from ableaudit.dbt.runner import run_dbt
if step == "prepare":
    run_dbt(["seed"], wh)
    run_dbt(["build", "--select", "+int_prompts"], wh)
elif step == "import":
    from ableaudit.ingest.responses import import_responses
    from ableaudit.warehouse import landing
    path = Path(sys.argv[3])
    with landing.recording(wh, "import-responses", path, file=path):
        import_responses(path, wh)
else:
    run_dbt(["seed"], wh)
    run_dbt(["build"], wh)
"""


def write_responses(path: Path, models: list[str], samples: int, pool: list[str]) -> int:
    """A Parquet file of imported responses: every query x condition of the built-in set."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    queries = [
        line.split(",")[0] for line in (ROOT / "seeds" / "queries.csv").read_text().splitlines()[1:]
    ]
    disabilities = [
        line.split(",")[0]
        for line in (ROOT / "seeds" / "disabilities.csv").read_text().splitlines()[1:]
    ]
    rng = random.Random(len(models) * 1000 + samples)
    cols: dict[str, list] = {
        k: [] for k in ("model_id", "query_id", "disability", "sample_index", "response_text")
    }
    for model in models:
        for query_id in sorted(set(queries)):
            for disability in [""] + disabilities:
                for sample in range(samples):
                    cols["model_id"].append(model)
                    cols["query_id"].append(query_id)
                    cols["disability"].append(disability)
                    cols["sample_index"].append(sample)
                    cols["response_text"].append(rng.choice(pool))
    pq.write_table(pa.table(cols), path)
    return len(cols["model_id"])


def run_step(project: Path, env: dict[str, str], step: str, wh: Path, *extra: str) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _STEP, step, str(wh), *extra],
        cwd=project,
        env=env | {"PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{step} failed in {project}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "mb": round(wh.stat().st_size / 1e6)}


def measure(project: Path, work: Path, first: Path, more: Path) -> dict[str, dict]:
    work.mkdir(parents=True, exist_ok=True)
    wh = work / "ableaudit.duckdb"
    env = dict(os.environ)
    env.update(
        DBT_TARGET_PATH=str(work / "target"),
        DBT_LOG_PATH=str(work / "logs"),
        ABLEAUDIT_REGARD_MODEL=str(work / "no-regard-model"),
        ABLEAUDIT_PROJECT_DIR=str(project),
    )
    run_step(project, env, "prepare", wh)
    run_step(project, env, "import", wh, str(first))
    out = {"full build": run_step(project, env, "build", wh)}
    out["no-op rebuild"] = run_step(project, env, "build", wh)
    run_step(project, env, "import", wh, str(more))
    out["one more model"] = run_step(project, env, "build", wh)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", type=Path, help="another checkout of the project to compare")
    p.add_argument("--models", type=int, default=2, help="models in the first landing")
    p.add_argument("--samples", type=int, default=2, help="samples per prompt")
    p.add_argument("--texts", type=int, default=2000, help="distinct answers in the pool")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()

    rng = random.Random(0)
    pool = [" ".join(rng.choices(_WORDS, k=250)) + f" ({i})" for i in range(args.texts)]
    with tempfile.TemporaryDirectory(prefix="bench-incremental-") as tmp:
        tmp_path = Path(tmp)
        first, more = tmp_path / "first.parquet", tmp_path / "more.parquet"
        n_first = write_responses(
            first, [f"model-{i}" for i in range(args.models)], args.samples, pool
        )
        n_more = write_responses(more, ["model-extra"], args.samples, pool)
        print(f"landing {n_first:,} generations, then {n_more:,} more ({args.texts:,} texts)")
        projects = {"this": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
        results = {
            name: measure(project.resolve(), tmp_path / name, first, more)
            for name, project in projects.items()
        }
    for name, steps in results.items():
        full = steps["full build"]["cpu_s"]
        print(f"\n{name} ({projects[name]})")
        print(f"  {'step':<18} {'CPU s':>8} {'wall s':>8} {'of full':>8} {'file MB':>8}")
        for step, m in steps.items():
            share = m["cpu_s"] / full if full else float("nan")
            print(f"  {step:<18} {m['cpu_s']:>8.1f} {m['wall_s']:>8.1f} {share:>8.0%} {m['mb']:>8}")
    if "baseline" in results:
        print("\nthis / baseline, CPU:")
        for step in results["this"]:
            ratio = results["this"][step]["cpu_s"] / results["baseline"][step]["cpu_s"]
            print(f"  {step:<18} {ratio:>6.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
