"""``bench/warehouse.py``: its fixture, its report, and one real run at the smallest size."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "bench" / "warehouse.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_warehouse", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_warehouse"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = _bench()


def _prompts() -> set[tuple[str, str]]:
    with open(PROJECT_ROOT / "seeds" / "queries.csv", newline="", encoding="utf-8") as fh:
        queries = [r["query_id"] for r in csv.DictReader(fh)]
    with open(PROJECT_ROOT / "seeds" / "disabilities.csv", newline="", encoding="utf-8") as fh:
        disabilities = [r["disability_id"] for r in csv.DictReader(fh)]
    return {(q, d) for q in queries for d in ["", *disabilities]}


def test_word_lists_carry_the_sentiment_they_claim():
    lexicon = SentimentIntensityAnalyzer().lexicon
    assert not [w for w in bench._FILL if w in lexicon]
    assert all(lexicon.get(w, 0) > 0 for w in bench._POSITIVE)
    assert all(lexicon.get(w, 0) < 0 for w in bench._NEGATIVE)


def test_answer_pool_is_distinct_seeded_and_runs_from_negative_to_positive():
    pool = bench.answer_pool(200, seed=3)
    assert len(set(pool)) == 200 and pool == bench.answer_pool(200, seed=3)
    assert pool != bench.answer_pool(200, seed=4)
    assert all(len(t.split()) == 250 for t in pool)
    analyzer = SentimentIntensityAnalyzer()
    compound = [analyzer.polarity_scores(t)["compound"] for t in pool]
    low, high = sum(compound[:50]) / 50, sum(compound[-50:]) / 50
    assert low < 0 < high


def test_fixture_holds_every_prompt_once_per_model_temperature_and_sample(tmp_path):
    fx = bench.make_fixture(2340 * 10 + 1, tmp_path, pool=100)  # rounds up to 11 sets
    assert (fx.rows, fx.combos, fx.models) == (2340 * 11, 11, 2)
    main = pq.read_table(fx.main).to_pandas()
    assert len(main) == fx.rows
    keys = ["model_id", "temperature", "sample_index"]
    assert main.groupby(keys).size().eq(2340).all() and main.groupby(keys).ngroups == 11
    assert set(main.model_id) == {"bench-000", "bench-001"}
    assert set(zip(main.temperature, main.sample_index, strict=True)) == {
        (t, s) for t in bench.TEMPERATURES for s in bench.SAMPLES
    }
    for _, unit in main.groupby(keys):
        assert set(zip(unit.query_id, unit.disability, strict=True)) == _prompts()
    assert main.response_text.nunique() <= 100
    for path, model in ((fx.extra, bench.EXTRA_MODEL), (fx.another, bench.ANOTHER_MODEL)):
        extra = pq.read_table(path).to_pandas()
        assert len(extra) == 2340 and set(extra.model_id) == {model}
        assert set(zip(extra.query_id, extra.disability, strict=True)) == _prompts()
    again = tmp_path / "again"
    bench.make_fixture(2340 * 10 + 1, again, pool=100)
    assert pq.read_table(again / "responses.parquet").equals(pq.read_table(fx.main))


def _stage(name: str, cpu: float, slowest: bool) -> dict:
    return {
        "name": name,
        "command": ["ableaudit"],
        "wall_s": 2 * cpu,
        "cpu_s": cpu,
        "user_s": cpu,
        "sys_s": 0.0,
        "max_rss_mb": 1024.0,
        "warehouse_mb": 50.0,
        "log": "x.log",
        "slowest": [{"node": "model.ableaudit.degradation", "status": "success", "seconds": 3.0}]
        if slowest
        else [],
        "dbt": {"elapsed_s": cpu, "models": 90, "models_s": 5.0, "tests": 800, "tests_s": 4.0}
        if slowest
        else {},
    }


def test_node_memory_matches_samples_to_the_nodes_that_ran(tmp_path):
    def stamp(t):
        from datetime import UTC, datetime

        return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")

    results = {
        "results": [
            {
                "unique_id": n,
                "timing": [{"name": "execute", "started_at": stamp(a), "completed_at": stamp(b)}],
            }
            for n, a, b in (("model.a", 100.0, 110.0), ("model.b", 110.5, 120.0))
        ]
    }
    path = tmp_path / "run_results.json"
    path.write_text(json.dumps(results))
    samples = [(95.0, 500.0), (105.0, 2000.0), (115.0, 3000.0), (119.0, 2500.0), (130.0, 3500.0)]
    memory = bench.node_memory(path, samples)
    assert [(n["node"], n["peak_mb"]) for n in memory["nodes"]] == [
        ("model.b", 3000),
        ("model.a", 2000),
    ]
    assert memory["peak_mb"] == 3500 and memory["after_dbt_peak_mb"] == 3500
    assert memory["before_dbt_peak_mb"] == 500 and memory["after_dbt_s"] == 10.0


def test_report_names_every_stage_ratio_and_growth():
    def result(rows: int, scale: float) -> dict:
        cpu = {"import": 10, "build_full": 100, "build_noop": 1, "build_forced": 60}
        cpu |= {"import_increment": 5, "import_increment_2": 5}
        cpu |= {"build_increment": 80, "build_increment_2": 40, "publish": 2}
        stages = {n: _stage(n, c * scale, n in bench.BUILDS) for n, c in cpu.items()}
        return {
            "rows": rows,
            "models": 1,
            "prompt_sets": rows // 2340,
            "pool": 20000,
            "increment_rows": 2340,
            "stages": stages,
            "ratios": bench.ratios(rows, {n: bench.Stage(**s) for n, s in stages.items()}),
            "degradation_check": {"matched": 7, "rows": 7, "mismatched": 0, "pairs": 2106}
            | {"overall_pct": [51.2]},
        }

    small, large = result(23400, 1.0), result(46800, 2.0)
    text = bench.format_size(small)
    for name in bench.STAGES:
        assert f"| {name} |" in text
    assert "no-op rebuild (skipped) / full build, CPU: 1.0%" in text
    assert "no-op rebuild with --force / full build, CPU: 60.0%" in text
    assert "import rows/s (wall, the whole command): 1,170" in text
    assert "incremental build / full build, CPU: 80.0%" in text
    assert "(import + build) of one more model / full build, CPU: 85.0%" in text
    assert (
        "incremental build of another model (standby copy in place) / full build, CPU: 40.0%"
        in text
    )
    assert "(import + build) of another model / full build, CPU: 45.0%" in text
    assert text.count("the 10 slowest nodes") == 5 and "model.ableaudit.degradation" in text
    assert "7 of 7 (model, arm, slice) rows matched, 0 mismatched" in text
    grown = {g["stage"]: g for g in bench.growth([small, large])}
    assert grown["build_full"]["cpu_ratio"] == 2.0
    assert grown["build_full"]["marginal_cpu_ms_per_generation"] == round(1000 * 100 / 23400, 4)
    assert "| build_full | 23,400 | 46,800 | 2.00 | 2.00 |" in bench.format_growth(
        list(grown.values())
    )


@pytest.mark.long
def test_one_real_run_times_each_stage_and_matches_the_independent_check(tmp_path, monkeypatch):
    """The smallest size through the real CLI: import, the first build and publish."""
    monkeypatch.delenv("DBT_EXCLUDE_RESOURCE_TYPES", raising=False)  # the suite's: a real build
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--rows",
            "2340",
            "--pool",
            "300",
            "--stages",
            "import",
            "build_full",
            "publish",
            "--json",
            str(out),
            "--keep",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["machine"]["project"] == str(PROJECT_ROOT)
    (size,) = figures["sizes"]
    assert size["rows"] == 2340 and list(size["stages"]) == ["import", "build_full", "publish"]
    for stage in size["stages"].values():
        assert stage["wall_s"] > 0 and stage["cpu_s"] > 0 and stage["max_rss_mb"] > 0
    build = size["stages"]["build_full"]
    assert len(build["slowest"]) == 10 and build["dbt"]["tests"] > 100
    assert size["ratios"]["import_rows_per_s"] > 0
    check = size["degradation_check"]
    assert check["mismatched"] == 0 and check["matched"] == check["rows"] > 0
    assert check["pairs"] == 2106  # 234 queries x 9 disabilities
    assert "| build_full |" in done.stdout and "rows matched, 0 mismatched" in done.stdout
    published = tmp_path / "work" / "rows-2340" / "published" / "ableaudit.duckdb"
    assert published.is_file()
    memory = build["memory"]
    assert memory["peak_mb"] > 0 and memory["nodes"] and memory["after_dbt_peak_mb"] > 0
    assert "the nodes that ran at the highest RSS" in done.stdout

    # bench/publish.py on the kept warehouse: each relation of the copy, timed
    timings = tmp_path / "publish.json"
    warehouse = tmp_path / "work" / "rows-2340" / "ableaudit.duckdb"
    done = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "bench" / "publish.py"),
            "--warehouse",
            str(warehouse),
            "--json",
            str(timings),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(timings.read_text())
    rows = {r["relation"]: r["rows"] for r in result["fresh"]["relations"]}
    assert rows["raw.generations"] == 2340 and rows["main.pair_details"] == 2106
    # the copy less the one model, updated model by model and row by row, to the same rows
    for update in ("update", "update_row_by_row"):
        changed = {r["relation"]: (r["change"], r["rows"]) for r in result[update]["relations"]}
        assert changed["raw.generations"] == ("updated", 2340), update
        assert changed["main.disabilities"] == ("unchanged", 9), update
    assert "model by model / row by row:" in done.stdout
    import duckdb

    con = duckdb.connect(str(published), read_only=True)
    try:
        listed = con.execute("select count(*) from publish.relations").fetchone()[0]
    finally:
        con.close()
    assert len(result["fresh"]["relations"]) == listed
    assert "the 15 slowest relations" in done.stdout


def test_a_ratio_is_printed_from_its_value_not_from_a_rounded_one():
    # 25.615 / 257.499 = 9.948%: rounded to four places first (0.0995), it printed as 10.0%
    stages = {
        n: _stage(n, c, n in bench.BUILDS)
        for n, c in {"build_full": 257.499189, "build_increment": 25.615063}.items()
    }
    ratios = bench.ratios(23400, {n: bench.Stage(**s) for n, s in stages.items()})
    assert f"{ratios['build_increment_over_full_cpu']:.1%}" == "9.9%"
