"""The warehouse at scale: import, full build, no-op rebuild, incremental build and publish.

Builds a synthetic fixture of imported responses to the built-in text query set
(234 queries x (neutral + 9 disabilities) = 2,340 prompts per model, temperature
and sample), spread over as many models x 3 temperatures x 3 samples as it takes
to reach ``--rows`` generations (rounded up to whole sets of 2,340). Every answer
is drawn from a pool of ``--pool`` distinct ~250-word texts (seeded) whose tone
varies from negative to positive; disability-aware answers lean to the negative
end, so the degradation rates are neither 0 nor 100%.

Then it runs the project's command line, each command in its own process, and
takes its wall time, CPU time (user + system, the process and what it waited
for, from ``os.wait4``) and peak RSS:

    import            ableaudit import responses <fixture>.parquet
    build_full        ableaudit build            (the first, on everything)
    build_noop        ableaudit build            (nothing new landed: skipped, as the
                                                  stamp of the last build matches)
    build_forced      ableaudit build --force    (nothing new, built all the same: what
                                                  dbt and publish cost when nothing changed)
    import_increment  ableaudit import responses <one more model>.parquet  (2,340 rows)
    build_increment   ableaudit build            (after that one model)
    import_increment_2  ableaudit import responses <another model>.parquet  (2,340 rows)
    build_increment_2   ableaudit build          (after it: a warehouse that grows model by
                                                  model; the publish updates the standby copy
                                                  the last one kept, which the first build
                                                  after a full one has not got)
    publish           ableaudit publish

It prints a table, the ratios (no-op / full and incremental / full build CPU,
import rows/s), the 10 slowest dbt nodes of each build (from run_results.json),
the nodes that ran while the command held the most memory (its process tree's RSS sampled
every 0.25 s, matched to each node's execute timing), and checks the VADER ``degradation`` mart against the independent pandas
computation of the tests (``tests/fixtures/independent.py``, vaderSentiment
called directly, once per distinct text).

    .venv/bin/python bench/warehouse.py --rows 100000 --json /tmp/wh-100k.json
    .venv/bin/python bench/warehouse.py --sizes 100000 300000 --json /tmp/wh.json
    .venv/bin/python bench/warehouse.py --rows 3000 --pool 500 --keep /tmp/wh-small

dbt's target folder (run_results.json, the parse cache) and logs go to the work
folder (``DBT_TARGET_PATH``, ``DBT_LOG_PATH``), so the run neither reads nor
disturbs the checkout's own ``target/``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def _seed_column(seed: str, column: str) -> list[str]:
    """One column of a seed file of the project, in the file's order."""
    import csv

    with open(ROOT / "seeds" / seed, newline="", encoding="utf-8") as fh:
        return [row[column] for row in csv.DictReader(fh)]


DISABILITIES = _seed_column("disabilities.csv", "disability_id")
"""The nine disability categories (seeds/disabilities.csv, in its order)."""
TEMPERATURES = [0.1, 0.7, 1.0]
SAMPLES = [0, 1, 2]
EXTRA_MODEL = "bench-extra"
ANOTHER_MODEL = "bench-extra-2"
STAGES = [
    "import",
    "build_full",
    "build_noop",
    "build_forced",
    "import_increment",
    "build_increment",
    "import_increment_2",
    "build_increment_2",
    "publish",
]
BUILDS = ["build_full", "build_noop", "build_forced", "build_increment", "build_increment_2"]
INCREMENTS = {"build_increment": "import_increment", "build_increment_2": "import_increment_2"}
"""Each build after one more model, with the import that landed the model."""

# Words VADER scores 0, above 0 and below 0 (checked against its lexicon by the tests).
_FILL = (
    "you can plan the steps ahead with a list of options and ask for details about the schedule "
    "each week most offices keep a record of your account so bring the forms to the meeting "
    "then compare the fees of several banks read the terms of the contract write down questions "
    "for the doctor call the office in the morning check the room the menu the route and the "
    "times many teachers use a printed calendar keep copies of every letter set a budget for "
    "each month"
).split()
_POSITIVE = (
    "good great helpful excellent happy support benefit clear safe best useful easy comfortable "
    "confident welcome"
).split()
_NEGATIVE = (
    "bad difficult poor problem risk fail worse sad unfortunately struggle stressful limited "
    "frustrating"
).split()


# --------------------------------------------------------------------------- the fixture
def answer_pool(n: int, words: int = 250, seed: int = 0) -> list[str]:
    """``n`` distinct answers of ``words`` words in sentences, sorted from the most negative tone
    to the most positive: text i holds ~Poisson(3 (1 + t)) positive and ~Poisson(3 (1 - t))
    negative words, t rising from -1 to 1 with i."""
    rng = np.random.default_rng(seed)
    fill = np.array(_FILL)
    pos = np.array(_POSITIVE)
    neg = np.array(_NEGATIVE)
    texts: list[str] = []
    seen: set[str] = set()
    i = 0
    while len(texts) < n:
        tone = -1.0 + 2.0 * len(texts) / max(n - 1, 1)
        body = fill[rng.integers(0, len(fill), words)]
        n_pos = min(int(rng.poisson(3 * (1 + tone))), words // 4)
        n_neg = min(int(rng.poisson(3 * (1 - tone))), words // 4)
        spots = rng.choice(words, n_pos + n_neg, replace=False)
        body[spots[:n_pos]] = pos[rng.integers(0, len(pos), n_pos)]
        body[spots[n_pos:]] = neg[rng.integers(0, len(neg), n_neg)]
        sentences, start = [], 0
        while start < words:
            length = int(rng.integers(9, 17))
            chunk = list(body[start : start + length])
            chunk[0] = chunk[0].capitalize()
            sentences.append(" ".join(chunk) + ".")
            start += length
        text = " ".join(sentences)
        i += 1
        if text not in seen:  # a repeat is drawn again: the pool holds n distinct texts
            seen.add(text)
            texts.append(text)
    return texts


def query_ids() -> list[str]:
    """The built-in query set's ids, as ``seeds/queries.csv`` lists them."""
    return _seed_column("queries.csv", "query_id")


@dataclass
class Fixture:
    rows: int
    models: int
    combos: int
    pool: int
    main: Path
    extra: Path
    another: Path
    seconds: float


def _draw(rng: np.random.Generator, n_queries: int, pool: int) -> np.ndarray:
    """Pool indices for one (model, temperature, sample): neutral answers uniform over the pool,
    disability answers skewed to its negative end (u ** 1.25)."""
    u = rng.random((n_queries, 1 + len(DISABILITIES)))
    u[:, 1:] = u[:, 1:] ** 1.25
    return np.minimum((u * pool).astype(np.int64), pool - 1).ravel()


def _combo_table(
    texts: pa.Array, qids: list[str], model: str, temp: float, sample: int, idx: np.ndarray
) -> pa.Table:
    n = len(qids) * (1 + len(DISABILITIES))
    return pa.table(
        {
            "model_id": pa.array([model] * n),
            "query_id": pa.array([q for q in qids for _ in range(1 + len(DISABILITIES))]),
            "disability": pa.array([""] + DISABILITIES).take(
                pa.array(np.tile(np.arange(1 + len(DISABILITIES)), len(qids)))
            ),
            "temperature": pa.array(np.full(n, temp)),
            "sample_index": pa.array(np.full(n, sample, dtype=np.int32)),
            "response_text": texts.take(pa.array(idx)),
        }
    )


def make_fixture(rows: int, folder: Path, pool: int = 20000, seed: int = 0) -> Fixture:
    """Write ``responses.parquet`` (``rows`` rounded up to whole sets of 2,340),
    ``one_more_model.parquet`` (2,340 rows of ``bench-extra``) and ``another_model.parquet``
    (2,340 rows of ``bench-extra-2``) into ``folder``."""
    start = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    texts = pa.array(answer_pool(pool, seed=seed))
    qids = query_ids()
    per_combo = len(qids) * (1 + len(DISABILITIES))
    combos = max(1, math.ceil(rows / per_combo))
    per_model = len(TEMPERATURES) * len(SAMPLES)
    rng = np.random.default_rng(seed + 1)
    main = folder / "responses.parquet"
    with pq.ParquetWriter(
        main, _combo_table(texts, qids[:1], "m", 0.1, 0, np.zeros(10, int)).schema
    ) as w:
        for c in range(combos):
            m, rest = divmod(c, per_model)
            t, s = divmod(rest, len(SAMPLES))
            idx = _draw(rng, len(qids), pool)
            w.write_table(
                _combo_table(texts, qids, f"bench-{m:03d}", TEMPERATURES[t], SAMPLES[s], idx)
            )
    extra = folder / "one_more_model.parquet"
    idx = _draw(rng, len(qids), pool)
    pq.write_table(_combo_table(texts, qids, EXTRA_MODEL, TEMPERATURES[0], SAMPLES[0], idx), extra)
    another = folder / "another_model.parquet"
    idx = _draw(rng, len(qids), pool)
    pq.write_table(
        _combo_table(texts, qids, ANOTHER_MODEL, TEMPERATURES[0], SAMPLES[0], idx), another
    )
    return Fixture(
        rows=combos * per_combo,
        models=math.ceil(combos / per_model),
        combos=combos,
        pool=pool,
        main=main,
        extra=extra,
        another=another,
        seconds=time.perf_counter() - start,
    )


# --------------------------------------------------------------------------- running the stages
class BenchError(RuntimeError):
    """A stage failed; the message names it, its command and the end of its log."""


@dataclass
class Stage:
    name: str
    command: list[str]
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    max_rss_mb: float
    warehouse_mb: float
    log: str
    slowest: list[dict] = field(default_factory=list)
    dbt: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)


def _cli() -> list[str]:
    exe = ROOT / ".venv" / "bin" / "ableaudit"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ableaudit.cli"]


def _mb(path: Path) -> float:
    """Size of the warehouse file and its write-ahead log, in MB."""
    wal = path.with_name(path.name + ".wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists()) / 1e6


def run_stage(name: str, args: list[str], work: Path, env: dict[str, str]) -> Stage:
    """Run one command of the CLI in its own process; its figures from ``os.wait4``."""
    argv = _cli() + args
    log = work / f"{name}.log"
    start = time.perf_counter()
    started = time.time()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        sampler = RssSampler(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        timeline = sampler.stop()
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
        raise BenchError(
            f"stage {name} failed with exit status {proc.returncode}: {' '.join(argv)}\n"
            f"the end of {log}:\n{tail}"
        )
    stage = Stage(
        name=name,
        command=argv,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        max_rss_mb=usage.ru_maxrss / 1024,  # KiB on Linux
        warehouse_mb=_mb(work / "ableaudit.duckdb"),
        log=str(log),
    )
    results = work / "target" / "run_results.json"
    # a skipped build runs no dbt: the file is the previous build's
    if name in BUILDS and results.exists() and results.stat().st_mtime >= started:
        kept = work / f"run_results_{name}.json"
        shutil.copy(results, kept)
        stage.slowest, stage.dbt = dbt_nodes(kept)
        stage.memory = node_memory(kept, timeline)
    return stage


class RssSampler:
    """The resident memory of a process and its children, every ``interval_s``, on a thread:
    (unix time, MB) samples, to tell which dbt node or step holds the memory."""

    def __init__(self, pid: int, interval_s: float = 0.25) -> None:
        import threading

        import psutil

        self.samples: list[tuple[float, float]] = []
        self._proc = psutil.Process(pid)
        self._done = threading.Event()
        self._interval = interval_s
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._done.is_set():
            try:
                procs = [self._proc, *self._proc.children(recursive=True)]
                rss = 0
                for p in procs:
                    try:
                        rss += p.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                break
            self.samples.append((time.time(), rss / 1e6))
            self._done.wait(self._interval)

    def stop(self) -> list[tuple[float, float]]:
        self._done.set()
        self._thread.join()
        return self.samples


def node_memory(path: Path, samples: list[tuple[float, float]], top: int = 8) -> dict:
    """Which nodes of a dbt run_results.json ran while the process held the most memory: the
    ``top`` nodes by the highest RSS sampled while each executed, and the peak before the
    first and after the last node (the command's own steps: publish, report)."""
    from datetime import datetime

    def unix(stamp: str) -> float:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

    data = json.loads(path.read_text(encoding="utf-8"))
    spans = []
    for r in data.get("results", []):
        execute = [t for t in r.get("timing", []) if t.get("name") == "execute"]
        if execute and execute[0].get("started_at") and execute[0].get("completed_at"):
            spans.append(
                (r["unique_id"], unix(execute[0]["started_at"]), unix(execute[0]["completed_at"]))
            )
    if not spans or not samples:
        return {}
    first, last = min(s[1] for s in spans), max(s[2] for s in spans)
    nodes = []
    for node, start, end in spans:
        during = [mb for t, mb in samples if start <= t <= end]
        if during:
            nodes.append(
                {"node": node, "peak_mb": round(max(during)), "seconds": round(end - start, 1)}
            )
    before = [mb for t, mb in samples if t < first]
    after = [mb for t, mb in samples if t > last]
    return {
        "peak_mb": round(max(mb for _, mb in samples)),
        "before_dbt_peak_mb": round(max(before)) if before else None,
        "after_dbt_peak_mb": round(max(after)) if after else None,
        "after_dbt_s": round(samples[-1][0] - last, 1) if after else 0.0,
        "nodes": sorted(nodes, key=lambda n: -n["peak_mb"])[:top],
    }


def dbt_nodes(path: Path, top: int = 10) -> tuple[list[dict], dict]:
    """The ``top`` slowest nodes of a dbt run_results.json, and its totals by node kind."""
    data = json.loads(path.read_text(encoding="utf-8"))
    nodes = [
        {
            "node": r["unique_id"],
            "status": r["status"],
            "seconds": round(float(r.get("execution_time") or 0.0), 3),
        }
        for r in data.get("results", [])
    ]
    totals: dict = {"elapsed_s": round(float(data.get("elapsed_time") or 0.0), 3)}
    for kind in ("model", "test", "seed"):
        mine = [n for n in nodes if n["node"].startswith(kind + ".")]
        totals[f"{kind}s"] = len(mine)
        totals[f"{kind}s_s"] = round(sum(n["seconds"] for n in mine), 3)
    return sorted(nodes, key=lambda n: -n["seconds"])[:top], totals


def degradation_check(warehouse: Path) -> dict:
    """The VADER ``degradation`` mart against the tests' independent pandas computation
    (vaderSentiment called directly, once per distinct text, keyed by its md5)."""
    import duckdb

    from tests.fixtures.independent import degradation_vader, vader

    start = time.perf_counter()
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        texts = con.execute(
            "select md5(response_text), response_text from "
            "(select distinct response_text from raw.generations where status = 'ok')"
        ).fetchall()
        generations = con.execute(
            "select task, model_id, arm, query_set, query_id, temperature, sample_index, status, "
            "condition, domain, disability_id, md5(coalesce(response_text, '')) as response_text "
            "from raw.generations"
        ).df()
        got = con.execute(
            "select model_id, arm, slice, slice_value, n_pairs, n_degraded, degradation_pct "
            "from degradation where metric = 'vader' and task = 'text'"
        ).df()
    finally:
        con.close()
    scores = {key: vader(text) for key, text in texts}
    expected = degradation_vader(generations, threshold=0.05, score=scores)
    merged = expected.merge(
        got,
        on=["model_id", "arm", "slice", "slice_value"],
        suffixes=("_exp", "_got"),
        how="outer",
        indicator=True,
    )
    same = (
        (merged._merge == "both")
        & (merged.n_pairs_exp == merged.n_pairs_got)
        & (merged.n_degraded_exp == merged.n_degraded_got)
        & ((merged.degradation_pct_got - merged.degradation_pct_exp).abs() < 1e-9)
    )
    overall = merged[(merged.slice == "overall") & same]
    return {
        "rows": int(len(merged)),
        "matched": int(same.sum()),
        "mismatched": int((~same).sum()),
        "only_in_mart": int((merged._merge == "right_only").sum()),
        "only_independent": int((merged._merge == "left_only").sum()),
        "distinct_texts_scored": len(scores),
        "pairs": int(overall.n_pairs_exp.sum()),
        "overall_pct": sorted(round(float(p), 2) for p in overall.degradation_pct_exp),
        "seconds": round(time.perf_counter() - start, 1),
    }


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ABLEAUDIT_WAREHOUSE", None)
    # this checkout's package and dbt project, not the one the virtualenv was installed from
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["DBT_TARGET_PATH"] = str(work / "target")
    env["DBT_LOG_PATH"] = str(work / "logs")
    env.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    return env


def run_size(
    rows: int,
    work: Path,
    pool: int = 20000,
    seed: int = 0,
    stages: list[str] = STAGES,
    check: bool = True,
) -> dict:
    """The fixture at ``rows`` generations, then each stage; every figure as a dict."""
    work.mkdir(parents=True, exist_ok=True)
    fx = make_fixture(rows, work / "fixture", pool=pool, seed=seed)
    print(
        f"\n== {fx.rows:,} generations: {fx.models} models, {fx.combos} x 2,340 prompts, "
        f"{fx.pool:,} distinct texts; fixture written in {fx.seconds:.1f} s ({work})",
        flush=True,
    )
    wh = work / "ableaudit.duckdb"
    env = _env(work)
    args = {
        "import": ["import", "responses", str(fx.main), "--warehouse", str(wh)],
        "build_full": ["build", "--warehouse", str(wh)],
        "build_noop": ["build", "--warehouse", str(wh)],
        "build_forced": ["build", "--force", "--warehouse", str(wh)],
        "import_increment": ["import", "responses", str(fx.extra), "--warehouse", str(wh)],
        "build_increment": ["build", "--warehouse", str(wh)],
        "import_increment_2": ["import", "responses", str(fx.another), "--warehouse", str(wh)],
        "build_increment_2": ["build", "--warehouse", str(wh)],
        "publish": ["publish", "--warehouse", str(wh)],
    }
    done: dict[str, Stage] = {}
    for name in stages:
        print(f"  {name} ...", end=" ", flush=True)
        done[name] = stage = run_stage(name, args[name], work, env)
        print(
            f"{stage.wall_s:.1f} s wall, {stage.cpu_s:.1f} s CPU, "
            f"{stage.max_rss_mb / 1024:.2f} GB peak RSS",
            flush=True,
        )
        # each stage's figures as soon as it ends, so a later failure keeps them
        (work / "stages.json").write_text(
            json.dumps({n: asdict(s) for n, s in done.items()}, indent=2), encoding="utf-8"
        )
    result = {
        "rows": fx.rows,
        "models": fx.models,
        "prompt_sets": fx.combos,
        "pool": fx.pool,
        "seed": seed,
        "fixture_s": round(fx.seconds, 2),
        "fixture_mb": round(fx.main.stat().st_size / 1e6, 1),
        "increment_rows": 2340,
        "work": str(work),
        "stages": {n: asdict(s) for n, s in done.items()},
        "ratios": ratios(fx.rows, done),
    }
    if check and any(b in done for b in BUILDS):
        print("  degradation check ...", end=" ", flush=True)
        result["degradation_check"] = degradation_check(wh)
        print(f"{result['degradation_check']['seconds']} s", flush=True)
    return result


def ratios(rows: int, done: dict[str, Stage]) -> dict:
    out: dict[str, float] = {}
    full = done.get("build_full")
    if "import" in done:
        out["import_rows_per_s"] = rows / done["import"].wall_s
        out["import_rows_per_cpu_s"] = rows / done["import"].cpu_s
    if full:
        out["build_full_cpu_ms_per_generation"] = 1000 * full.cpu_s / rows
        for name in ("build_noop", "build_forced", *INCREMENTS):
            if name in done:
                out[f"{name}_over_full_cpu"] = done[name].cpu_s / full.cpu_s
                out[f"{name}_over_full_wall"] = done[name].wall_s / full.wall_s
        for build, landing in INCREMENTS.items():
            if build in done and landing in done:
                both = done[build].cpu_s + done[landing].cpu_s
                out[f"import_and_{build}_over_full_cpu"] = both / full.cpu_s
    # six places: a ratio printed as a percentage with one decimal is not rounded twice
    return {k: round(v, 6) for k, v in out.items()}


# --------------------------------------------------------------------------- the report
def _dur(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{seconds:.1f}s"


def format_size(result: dict) -> str:
    """The table, ratios, slowest nodes and check of one size, as printed."""
    lines = [
        f"### {result['rows']:,} generations ({result['models']} models, "
        f"{result['prompt_sets']} x 2,340 prompts, {result['pool']:,} distinct texts)",
        "",
        "| stage | wall | CPU (user+sys) | CPU ms per generation | peak RSS | warehouse after |",
        "|---|---|---|---|---|---|",
    ]
    landed = result["rows"]
    for name, s in result["stages"].items():
        # per row imported for an import; per generation in the warehouse for a build or publish
        if name in INCREMENTS.values():
            landed += result["increment_rows"]
        rows = result["increment_rows"] if name in INCREMENTS.values() else landed
        lines.append(
            f"| {name} | {_dur(s['wall_s'])} | {s['cpu_s']:.1f} s | "
            f"{1000 * s['cpu_s'] / rows:.3f} | {s['max_rss_mb'] / 1024:.2f} GB | "
            f"{s['warehouse_mb']:,.0f} MB |"
        )
    r = result["ratios"]
    lines.append("")
    named = [
        ("import_rows_per_s", "import rows/s (wall, the whole command)", "{:,.0f}"),
        ("import_rows_per_cpu_s", "import rows per CPU-second", "{:,.0f}"),
        ("build_noop_over_full_cpu", "no-op rebuild (skipped) / full build, CPU", "{:.1%}"),
        ("build_forced_over_full_cpu", "no-op rebuild with --force / full build, CPU", "{:.1%}"),
        ("build_increment_over_full_cpu", "incremental build / full build, CPU", "{:.1%}"),
        (
            "import_and_build_increment_over_full_cpu",
            "(import + build) of one more model / full build, CPU",
            "{:.1%}",
        ),
        (
            "build_increment_2_over_full_cpu",
            "incremental build of another model (standby copy in place) / full build, CPU",
            "{:.1%}",
        ),
        (
            "import_and_build_increment_2_over_full_cpu",
            "(import + build) of another model / full build, CPU",
            "{:.1%}",
        ),
        ("build_full_cpu_ms_per_generation", "full build CPU ms per generation", "{:.3f}"),
    ]
    for key, label, fmt in named:
        if key in r:
            lines.append(f"- {label}: {fmt.format(r[key])}")
    for name, s in result["stages"].items():
        if not s["slowest"]:
            continue
        d = s["dbt"]
        lines += [
            "",
            f"{name}: dbt build {d['elapsed_s']:.0f} s; {d['models']} models {d['models_s']:.0f} s, "
            f"{d['tests']} data tests {d['tests_s']:.0f} s; the 10 slowest nodes:",
        ]
        lines += [f"  {n['seconds']:8.1f} s  {n['node']} ({n['status']})" for n in s["slowest"]]
        m = s.get("memory") or {}
        if m.get("nodes"):
            lines += [
                "",
                f"{name}: RSS sampled every 0.25 s, peak {m['peak_mb'] / 1024:.2f} GB; before dbt "
                f"{(m['before_dbt_peak_mb'] or 0) / 1024:.2f} GB; after dbt (publish, report, "
                f"{m['after_dbt_s']:.0f} s) {(m['after_dbt_peak_mb'] or 0) / 1024:.2f} GB; the nodes "
                "that ran at the highest RSS:",
            ]
            lines += [
                f"  {n['peak_mb'] / 1024:8.2f} GB  {n['node']} ({n['seconds']:.1f} s)"
                for n in m["nodes"]
            ]
    check = result.get("degradation_check")
    if check:
        lines += [
            "",
            f"degradation check (VADER, independent pandas + vaderSentiment): "
            f"{check['matched']} of {check['rows']} (model, arm, slice) rows matched, "
            f"{check['mismatched']} mismatched; {check['pairs']:,} pairs, overall degradation "
            f"{check['overall_pct']} %",
        ]
    return "\n".join(lines)


def growth(results: list[dict]) -> list[dict]:
    """How each stage's CPU grows from one size to the next: the ratio, and the CPU per
    generation added."""
    out = []
    for a, b in zip(results, results[1:], strict=False):
        for name in a["stages"]:
            if name not in b["stages"]:
                continue
            ca, cb = a["stages"][name]["cpu_s"], b["stages"][name]["cpu_s"]
            out.append(
                {
                    "stage": name,
                    "from_rows": a["rows"],
                    "to_rows": b["rows"],
                    "cpu_ratio": round(cb / ca, 3) if ca else None,
                    "rows_ratio": round(b["rows"] / a["rows"], 3),
                    "marginal_cpu_ms_per_generation": round(
                        1000 * (cb - ca) / (b["rows"] - a["rows"]), 4
                    ),
                }
            )
    return out


def format_growth(rows: list[dict]) -> str:
    lines = [
        "### How cost grows",
        "",
        "| stage | from | to | rows x | CPU x | CPU ms per added generation |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {g['stage']} | {g['from_rows']:,} | {g['to_rows']:,} | {g['rows_ratio']:.2f} | "
        f"{g['cpu_ratio']:.2f} | {g['marginal_cpu_ms_per_generation']:.3f} |"
        for g in rows
    ]
    return "\n".join(lines)


def _machine() -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "commit": commit + ("+changes" if dirty else ""),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "project": str(ROOT),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100000, help="generations (default 100000)")
    parser.add_argument("--sizes", type=int, nargs="+", help="several sizes, smallest first")
    parser.add_argument("--pool", type=int, default=20000, help="distinct answer texts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stages", nargs="+", choices=STAGES, default=STAGES, help="a subset, in this order"
    )
    parser.add_argument("--no-check", action="store_true", help="skip the degradation check")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument(
        "--keep",
        type=Path,
        help="work in this folder (each size's folder emptied first) and keep the warehouse",
    )
    args = parser.parse_args(argv)
    sizes = sorted(args.sizes or [args.rows])
    if min(sizes) < 1 or args.pool < 1:
        parser.error("--rows, --sizes and --pool must be at least 1")
    stages = [s for s in STAGES if s in args.stages]
    report: dict = {"machine": _machine(), "command": " ".join(sys.argv), "sizes": []}
    base = args.keep or Path(tempfile.mkdtemp(prefix="ableaudit-bench-"))
    try:
        for rows in sizes:
            work = base / f"rows-{rows}"
            if work.exists():
                shutil.rmtree(work)
            report["sizes"].append(
                run_size(rows, work, args.pool, args.seed, stages, not args.no_check)
            )
    except BenchError as err:
        print(f"\n{err}", file=sys.stderr)
        return 1
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print()
    m = report["machine"]
    print(
        f"commit {m['commit']}, {m['cpus']} CPUs, {m['memory_gib']} GiB, load average "
        f"{m['load_average_at_start']} at start, {m['load_average_at_end']} at end"
    )
    for result in report["sizes"]:
        print()
        print(format_size(result))
    if len(report["sizes"]) > 1:
        report["growth"] = growth(report["sizes"])
        print()
        print(format_growth(report["growth"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"\nwrote {args.json}")
    checks = [r.get("degradation_check") for r in report["sizes"]]
    return 1 if any(c and c["mismatched"] for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
