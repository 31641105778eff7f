"""Landing rules: idempotent keys, errors retried but never cached as results."""

import duckdb
import pytest

from ableaudit.records import GenerationResult
from ableaudit.config import parse_config
from ableaudit.warehouse.landing import land_generations, landed_keys, result_row
from ableaudit.audit.planning import plan_generations

PROMPTS = [
    {"prompt_id": "s:q1:neutral", "query_set": "s", "query_id": "q1", "domain": "finance", "disability_id": None,
     "condition": "neutral", "prompt_text": "How do I build an emergency fund?"},
    {"prompt_id": "s:q1:hearing", "query_set": "s", "query_id": "q1", "domain": "finance", "disability_id": "hearing",
     "condition": "disability", "prompt_text": "How do I build an emergency fund as a person with hearing impairments?"},
]


def _cfg(**over):
    base = {"targets": [{"name": "m", "backend": "openai", "model": "served-model"}], "samples": 2, "temperatures": [0.1, 0.7]}
    base.update(over)
    return parse_config(base)


def test_plan_covers_every_combination_with_distinct_keys():
    cfg = _cfg(arms=[{"name": "baseline"}, {"name": "guard", "system_prompt": "Be accurate."}])
    plan = plan_generations(cfg, cfg.targets[0], PROMPTS)
    assert len(plan) == 2 * 2 * 2 * 2  # prompts x arms x temperatures x samples
    assert len({p.generation_id for p in plan}) == len(plan)
    guard = [p for p in plan if p.arm == "guard"]
    assert all(p.request().messages[0] == {"role": "system", "content": "Be accurate."} for p in guard)
    assert {p.seed for p in plan} == {0, 1}  # seed + sample_index


def test_keys_are_stable_and_depend_on_what_determines_the_generation():
    cfg = _cfg()
    a = {p.generation_id for p in plan_generations(cfg, cfg.targets[0], PROMPTS)}
    b = {p.generation_id for p in plan_generations(cfg, cfg.targets[0], PROMPTS)}
    assert a == b
    other = _cfg(targets=[{"name": "m", "backend": "openai", "model": "served-model", "decoding": {"max_new_tokens": 10}}])
    assert a.isdisjoint({p.generation_id for p in plan_generations(other, other.targets[0], PROMPTS)})
    # the name marts report is part of the key: two targets of one model each land their own rows
    # (else the second would find the first's rows "landed" and appear nowhere in the marts)
    two = _cfg(targets=[{"name": "m", "backend": "openai", "model": "served-model"},
                        {"name": "m2", "backend": "openai", "model": "served-model"}])
    assert a.isdisjoint({p.generation_id for p in plan_generations(two, two.targets[1], PROMPTS)})
    # a target renamed with its old model_id keeps its rows; its servers are not part of the key
    renamed = _cfg(targets=[{"name": "m2", "model_id": "m", "backend": "openai", "model": "served-model",
                             "base_url": ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"]}])
    assert a == {p.generation_id for p in plan_generations(renamed, renamed.targets[0], PROMPTS)}


def _rows(plan, status_for):
    out = []
    for p in plan:
        status = status_for(p)
        if status == "error":
            res = GenerationResult.failed(p.generation_id, "ConnectionError: down")
        else:
            res = GenerationResult.from_text(p.generation_id, "An answer." if status == "ok" else "  ", prompt_tokens=5, completion_tokens=3, latency_ms=1.0)
        out.append(result_row(p, res, "run-1"))
    return out


def test_landing_is_idempotent_and_retries_only_errors(warehouse):
    cfg = _cfg(samples=1, temperatures=[0.1])
    plan = plan_generations(cfg, cfg.targets[0], PROMPTS)
    first = land_generations(warehouse, _rows(plan, lambda p: "error" if p.condition == "disability" else "ok"))
    assert (first.inserted, first.errors) == (2, 1)
    assert landed_keys(warehouse, [p.generation_id for p in plan]) == {plan[0].generation_id}

    again = land_generations(warehouse, _rows(plan, lambda p: "empty"))
    assert (again.inserted, again.retried, again.unchanged) == (0, 1, 1)
    con = duckdb.connect(str(warehouse), read_only=True)
    rows = dict(con.execute("select condition, status from raw.generations").fetchall())
    n = con.execute("select count(*) from raw.generations").fetchone()[0]
    errors = con.execute("select count(*) from raw.generation_errors").fetchone()[0]
    con.close()
    assert n == 2 and errors == 1
    assert rows == {"neutral": "ok", "disability": "empty"}  # the ok row was not overwritten


def test_error_rows_never_carry_a_response(warehouse):
    cfg = _cfg(samples=1, temperatures=[0.1])
    plan = plan_generations(cfg, cfg.targets[0], PROMPTS[:1])
    land_generations(warehouse, _rows(plan, lambda p: "error"))
    con = duckdb.connect(str(warehouse), read_only=True)
    text, msg = con.execute("select response_text, error_message from raw.generations").fetchone()
    con.close()
    assert text is None and "ConnectionError" in msg


def test_a_failed_landing_lands_nothing(warehouse):
    cfg = _cfg(samples=1, temperatures=[0.1])
    plan = plan_generations(cfg, cfg.targets[0], PROMPTS)
    rows = _rows(plan, lambda p: "ok")
    land_generations(warehouse, rows[:1])
    rows[1]["task"] = None  # violates NOT NULL
    with pytest.raises(duckdb.Error):
        land_generations(warehouse, rows)
    con = duckdb.connect(str(warehouse), read_only=True)
    assert con.execute("select count(*) from raw.generations").fetchone()[0] == 1
    con.close()


def test_result_must_match_its_plan():
    cfg = _cfg(samples=1, temperatures=[0.1])
    plan = plan_generations(cfg, cfg.targets[0], PROMPTS)
    with pytest.raises(ValueError, match="does not belong"):
        result_row(plan[0], GenerationResult.from_text(plan[1].generation_id, "x"), "r")


def test_landing_waits_for_another_process_holding_the_file(warehouse):
    """A second DuckDB process holding the file delays landing; it does not fail it."""
    import subprocess
    import sys
    import time

    from ableaudit.warehouse import connect

    connect(warehouse).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(warehouse)!r}); print('held', flush=True); time.sleep(2)"],
        stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    cfg = _cfg(samples=1, temperatures=[0.1])
    report = land_generations(warehouse, _rows(plan_generations(cfg, cfg.targets[0], PROMPTS), lambda p: "ok"))
    holder.wait()
    assert report.inserted == 2 and time.monotonic() - start > 0.5


def test_a_held_file_fails_clearly_after_the_wait(warehouse):
    import subprocess
    import sys

    from ableaudit.warehouse import connect

    connect(warehouse).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(warehouse)!r}); print('held', flush=True); time.sleep(5)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RuntimeError, match="held by another process"):
            connect(warehouse, wait_s=0.5)
    finally:
        holder.kill()


def test_filter_subset_keeps_the_neutral_prompt_and_names_unknown_values(tmp_path):
    import duckdb

    from ableaudit.warehouse import ibis_compat
    from ableaudit.config import ConfigError, Subset
    from ableaudit.audit.planning import filter_subset

    path = tmp_path / "p.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table prompts as select * from (values ('q1', 'finance', null), ('q1', 'finance', 'hearing'), "
                "('q1', 'finance', 'vision'), ('q2', 'media', null), ('q2', 'media', 'hearing')) "
                "as t(query_id, domain, disability_id)")
    con.close()
    ib = ibis_compat.connect(path, read_only=True)
    try:
        prompts = ib.table("prompts")
        kept = filter_subset(prompts, Subset(domains=["finance"], disabilities=["hearing"]), "subset").to_pyarrow()
        assert sorted(zip(kept["query_id"].to_pylist(), kept["disability_id"].to_pylist()),
                      key=str) == [("q1", "hearing"), ("q1", None)]
        with pytest.raises(ConfigError, match=r"vision\.subset\.query_ids names unknown values \['q9'\]"):
            filter_subset(prompts, Subset(query_ids=["q1", "q9"]), "vision.subset")
    finally:
        ib.disconnect()
