"""Every write is a landing with an id on its rows; `forget` removes one landing and nothing else."""

from __future__ import annotations

import dataclasses
import json
import os

import duckdb
import pytest

from ableaudit.cli import main
from ableaudit.warehouse import (
    connect,
    forgetting,
    landing,
    raw_schema,
    reference_landing,
    run_lease,
)
from tests.fixtures.warehouse import imported_row


def _q(wh, sql, params=None):
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def _row(query_id="edu_001", disability=None, text="Plan ahead.", model="model-a"):
    return imported_row(model, "baseline", query_id, "education", disability, "ok", text)


def _verdict(judgment_id: str, run_id: str | None) -> dict:
    return {
        "judgment_id": judgment_id,
        "judge_kind": "rubric",
        "judge_name": "j",
        "judge_model": "m",
        "prompt_version": "v1",
        "generation_id": "g",
        "subject_hash": "h",
        "raw_output": "{}",
        "call_status": "ok",
        "parse_status": "parsed",
        "parsed_json": "{}",
        "source": "imported",
        "run_id": run_id,
    }


def test_every_write_stamps_its_landing_and_records_it(warehouse):
    with landing.recording(warehouse, "import-responses", "a.csv") as first:
        landing.land_imported_generations(warehouse, [_row(), _row(disability="hearing")])
    landing.land_judgments(warehouse, [_verdict("j1", "judge-1")])
    reference_landing.replace_query_set(
        warehouse, "mine", [{"query_id": "q1", "domain": "d", "prompt_text": "t"}], "q.csv"
    )
    stamped = {
        t: {lid for (lid,) in _q(warehouse, f"select distinct landing_id from raw.{t}")}
        for t in ("generations", "judgments", "external_queries")
    }
    assert stamped["generations"] == {first.landing_id}
    assert first.rows == {"generations": 2}
    landings = {h["landing_id"]: h for h in forgetting.history(warehouse)}
    assert set(landings) == set().union(*stamped.values())
    (verdicts,) = stamped["judgments"]
    assert landings[verdicts]["kind"] == "judgments" and landings[verdicts]["run_id"] == "judge-1"
    (queries,) = stamped["external_queries"]
    assert landings[queries]["kind"] == "import-queries" and landings[queries]["source"] == "q.csv"
    assert all(h["status"] == "landed" and h["finished_at"] for h in landings.values())
    assert landings[first.landing_id]["row_count"] == 2


def test_relanding_identical_rows_keeps_their_landing(warehouse):
    query = [{"query_id": "q1", "domain": "d", "prompt_text": "t"}]
    with landing.recording(warehouse, "import-responses", "a.csv") as first:
        landing.land_imported_generations(warehouse, [_row()])
        reference_landing.replace_query_set(warehouse, "mine", query, "q.csv")
    with landing.recording(warehouse, "import-responses", "a.csv") as again:
        report, replaced = landing.land_imported_generations(warehouse, [_row()])
        reference_landing.replace_query_set(warehouse, "mine", query, "q.csv")
    assert (report.inserted, report.unchanged, replaced) == (0, 1, 0)
    assert again.rows == {} and first.rows == {"generations": 1, "external_queries": 1}
    assert _q(warehouse, "select distinct landing_id from raw.generations") == [(first.landing_id,)]
    assert _q(warehouse, "select distinct landing_id from raw.external_queries") == [
        (first.landing_id,)
    ]


def test_a_refused_write_leaves_no_landing_and_a_failed_one_says_so(warehouse):
    with pytest.raises(ValueError), landing.recording(warehouse, "import-responses", "a.csv"):
        raise ValueError("refused before landing")
    assert forgetting.history(warehouse) == []
    with pytest.raises(RuntimeError), landing.recording(warehouse, "import-x", "b.csv") as rec:
        landing.land_imported_generations(warehouse, [_row()])
        raise RuntimeError("after one write")
    (h,) = forgetting.history(warehouse)
    assert (h["landing_id"], h["status"], h["rows"]) == (
        rec.landing_id,
        "failed",
        {"generations": 1},
    )


def test_an_audit_run_is_one_landing(warehouse):
    run_lease.start_run(warehouse, "run-1", json.dumps({"name": "nightly"}))
    landing.land_generations(warehouse, [_row()] * 2 + [dict(_row("fin_001"), run_id="run-1")])
    row = dict(_row("hea_001"), run_id="run-1")
    landing.land_generations(warehouse, [row])
    landing.land_judgments(warehouse, [_verdict("j1", "run-1")])
    run_lease.finish_run(warehouse, "run-1", "completed")
    audits = [h for h in forgetting.history(warehouse) if h["kind"] == "audit"]
    assert len(audits) == 1
    (audit,) = audits
    assert audit["source"] == "audit nightly (run run-1)" and audit["status"] == "landed"
    assert audit["rows"] == {"generations": 1, "judgments": 1, "runs": 1}


def test_forget_refuses_an_audit_still_running_then_removes_it(warehouse):
    run_lease.start_run(warehouse, "run-1", "{}")
    landing.land_generations(warehouse, [dict(_row(), run_id="run-1")])
    (audit,) = forgetting.history(warehouse)
    with pytest.raises(forgetting.LandingError, match=f"still running \\(process {os.getpid()}"):
        forgetting.forget(warehouse, audit["landing_id"])
    run_lease.finish_run(warehouse, "run-1", "failed")
    done = forgetting.forget(warehouse, audit["landing_id"])
    assert done.rows == {"generations": 1, "runs": 1}
    assert _q(warehouse, "select count(*) from raw.generations") == [(0,)]
    assert _q(warehouse, "select count(*) from raw.runs") == [(0,)]
    (h,) = forgetting.history(warehouse)
    assert h["status"] == "forgotten" and h["forgotten_at"] is not None
    assert h["rows"] == {"generations": 1, "runs": 1}  # what it had landed stays on record


def test_forget_puts_back_what_a_replace_superseded(warehouse):
    """A, then B replacing A's text, then C replacing B's: forgetting B leaves C over A, and
    forgetting C then puts A's text back."""
    key = _row()["generation_id"]
    ids = {}
    for name, text in (("a", "first"), ("b", "second"), ("c", "third")):
        with landing.recording(warehouse, "import-responses", f"{name}.csv") as rec:
            landing.land_imported_generations(
                warehouse,
                [_row(text=text), _row(disability="hearing")],
                supersede=[key] if name != "a" else [],
            )
        ids[name] = rec.landing_id

    def live():
        return _q(
            warehouse,
            "select response_text, landing_id from raw.generations where generation_id = ?",
            [key],
        )

    def superseded():
        return _q(
            warehouse,
            "select response_text, landing_id, replaced_by_landing_id "
            "from raw.generation_history order by created_at",
        )

    assert live() == [("third", ids["c"])]
    assert forgetting.plan_forget(warehouse, ids["b"]).rows == {}
    forgetting.forget(warehouse, ids["b"])
    assert live() == [("third", ids["c"])]
    assert superseded() == [("first", ids["a"], ids["c"])]
    plan = forgetting.forget(warehouse, ids["c"])
    assert (plan.rows, plan.restored) == ({}, 1)
    assert live() == [("first", ids["a"])] and superseded() == []
    assert _q(warehouse, "select count(*) from raw.generations") == [(2,)]


def test_forget_removes_one_landing_of_each_table_and_nothing_else(warehouse):
    with landing.recording(warehouse, "import-queries", "q.csv") as queries:
        reference_landing.replace_query_set(
            warehouse, "mine", [{"query_id": "q1", "domain": "d", "prompt_text": "t"}], "q.csv"
        )
    with landing.recording(warehouse, "import-annotations", "r.csv") as ratings:
        reference_landing.land_annotations(
            warehouse,
            [
                {
                    "annotation_id": "a1",
                    "item_id": "g",
                    "item_kind": "generation",
                    "dimension": "judge_score",
                    "annotator_id": "ann",
                    "value": "3",
                    "value_num": 3.0,
                }
            ],
        )
    landing.land_generations(warehouse, [_row()])
    forgetting.forget(warehouse, ratings.landing_id)
    assert _q(warehouse, "select count(*) from raw.annotations") == [(0,)]
    assert _q(warehouse, "select count(*) from raw.external_queries") == [(1,)]
    assert _q(warehouse, "select count(*) from raw.generations") == [(1,)]
    forgetting.forget(warehouse, queries.landing_id)
    assert _q(warehouse, "select count(*) from raw.external_queries") == [(0,)]


def test_unknown_and_ambiguous_ids_are_named(warehouse):
    connect(warehouse).close()
    with pytest.raises(forgetting.LandingError, match="no landing 'nope'.*ableaudit history"):
        forgetting.forget(warehouse, "nope")
    con = connect(warehouse)
    con.execute(
        "insert into raw.landings (landing_id, kind, status) "
        "values ('abc111', 'x', 'landed'), ('abc222', 'x', 'landed')"
    )
    con.close()
    with pytest.raises(forgetting.LandingError, match="'abc' starts 2 landing ids"):
        forgetting.plan_forget(warehouse, "abc")
    assert forgetting.plan_forget(warehouse, "abc2").landing["landing_id"] == "abc222"


def test_rows_older_than_landing_ids_get_a_legacy_landing_per_run_or_write(warehouse):
    warehouse.parent.mkdir(parents=True)
    con = duckdb.connect(str(warehouse))
    con.execute("create schema raw")
    for t in raw_schema.STAMPED:  # the tables as they were declared before landing ids
        old = [c for c in t.columns if "landing_id" not in c.name]
        con.execute(dataclasses.replace(t, columns=tuple(old)).ddl())
    frame = [_row(), dict(_row("fin_001"), run_id=None), dict(_row("hea_001"), run_id=None)]
    for r in frame:  # three writes: one of an audit run, two imports without a run id
        con.execute(
            f"insert into raw.generations ({', '.join(r)}) values ({', '.join('?' * len(r))})",
            list(r.values()),
        )
    con.execute(
        "insert into raw.runs (run_id, config_json, status) "
        "values ('run-model-a', '{}', 'completed')"
    )
    con.close()

    legacy = {h["source"]: h for h in forgetting.history(warehouse)}  # history migrates it
    writes = {s for s in legacy if s.startswith("generations landed at")}
    assert set(legacy) == {"run run-model-a"} | writes and len(writes) == 2
    assert len(legacy) == 3 and {h["kind"] for h in legacy.values()} == {"legacy"}
    assert legacy["run run-model-a"]["rows"] == {"generations": 1, "runs": 1}
    assert _q(warehouse, "select count(*) from raw.generations where landing_id is null") == [(0,)]
    one_write = next(h for s, h in legacy.items() if s != "run run-model-a")
    forgetting.forget(warehouse, one_write["landing_id"])
    assert _q(warehouse, "select count(*) from raw.generations") == [(2,)]


def test_history_prints_a_table_and_forget_asks_first(warehouse, capsys, monkeypatch):
    assert main(["history", "--warehouse", str(warehouse)]) == 2
    assert f"no warehouse at {warehouse}" in capsys.readouterr().err
    assert not warehouse.exists()
    with landing.recording(warehouse, "import-responses", "/data/responses.csv") as rec:
        landing.land_imported_generations(warehouse, [_row()])
    assert main(["history", "--warehouse", str(warehouse)]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if rec.landing_id in line)
    for cell in ("import-responses", "/data/responses.csv", "1 row of generations", "landed"):
        assert cell in line
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["forget", rec.landing_id, "--warehouse", str(warehouse)]) == 2
    assert "pass --yes" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert main(["forget", rec.landing_id, "--warehouse", str(warehouse)]) == 0
    assert "Nothing forgotten" in capsys.readouterr().out
    assert _q(warehouse, "select count(*) from raw.generations") == [(1,)]
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert main(["forget", rec.landing_id, "--no-build", "--warehouse", str(warehouse)]) == 0
    assert "removed 1 row of generations" in capsys.readouterr().out
    assert _q(warehouse, "select count(*) from raw.generations") == [(0,)]


def test_an_import_command_says_its_landing_and_keeps_the_files_digest(warehouse, capsys):
    import hashlib

    from ableaudit import PROJECT_ROOT
    from ableaudit.dbt.build_stamp import raw_digest

    sample = PROJECT_ROOT / "tests" / "data" / "accesseval_sample.csv"
    args = [
        "import",
        "queries",
        str(sample),
        "--query-set",
        "sample",
        "--warehouse",
        str(warehouse),
    ]
    assert main(args) == 0
    (h,) = forgetting.history(warehouse)
    n = h["rows"]["external_queries"]
    assert n > 0 and h["kind"] == "import-queries" and h["source"] == str(sample)
    assert h["source_sha256"] == hashlib.sha256(sample.read_bytes()).hexdigest()
    out = capsys.readouterr().out
    assert f"Landing {h['landing_id']}: {n} rows of external_queries." in out
    assert f"Undo it with `ableaudit forget {h['landing_id']}`" in out
    digest = raw_digest(warehouse)
    assert main(args) == 0  # the same file again: nothing new, the rows keep their landing
    assert "Nothing new (every row had landed already): no landing recorded." in (
        capsys.readouterr().out
    )
    assert len(forgetting.history(warehouse)) == 1
    assert raw_digest(warehouse) == digest  # so the next build is skipped
    assert _q(warehouse, "select distinct landing_id from raw.external_queries") == [
        (h["landing_id"],)
    ]
