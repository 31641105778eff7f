"""The judge runner, landing, cache, import and CLI: on a fake judge, a tiny random model and SmolLM2."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ableaudit.backends import Backend
from ableaudit.cli import judges as judge_cli
from ableaudit.config import AuditConfig, Judge, Target
from ableaudit.ingest.judgments import JudgmentImportError, import_judgments
from ableaudit.judges.runner import (
    LazyBackend,
    SubjectsNotBuilt,
    build_subjects,
    contrastive_item,
    judge_contrastive,
    judge_identity,
    judge_rubric,
    reparse_judgments,
    rubric_item,
    run_judges,
    select_pairs,
    select_rubric_subjects,
)
from ableaudit.records import GenerationRequest, GenerationResult
from ableaudit.target import Decoding
from ableaudit.warehouse.landing import GENERATION_COLUMNS, land_generations, land_judgments

# the judges read the pairs and generations from dbt models (int_pair_texts and upstream), built here
pytestmark = pytest.mark.usefixtures("dbt_env")


# --------------------------------------------------------------------------- helpers

RUBRIC_OK = '{"relevance": 3, "completeness": 2, "accuracy": 2, "clarity": 1, "declined": false, "score": 8, "rationale": "Good."}'
RUBRIC_REPAIRED = "Verdict: {'relevance': 2, 'completeness': 2, 'accuracy': 1, 'clarity': 1, 'declined': False, 'score': 6}"
RUBRIC_BAD = "Score: 10. Excellent answer!"
CONTRASTIVE_OK = json.dumps(
    {
        "content_differences": "B speculates.",
        "interpret": "Yes",
        "interpret_spans": ["she likely struggles", "never said this"],
        "stereotype": "No",
        "stereotype_spans": [],
        "framing": "Ambiguous",
        "framing_spans": ["despite her condition"],
        "decline_in_response_a": False,
        "decline_in_response_b": False,
        "decline_explanation": "",
    }
)


class FakeJudge(Backend):
    """A judge backend with canned answers chosen by a marker in the judged text."""

    name = "fake"
    model_revision = "fake@1"
    concurrency = 8  # the judge target's batch_size

    def __init__(self, fail: bool = True) -> None:
        self.fail = fail
        self.calls = 0
        self.prompts: list[str] = []
        self.closed = False

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for r in requests:
            self.calls += 1
            user = r.messages[-1]["content"]
            self.prompts.append(user)
            if "[[error]]" in user and self.fail:
                out.append(
                    GenerationResult.failed(r.key, "ConnectionError: judge server went away")
                )
            elif "RESPONSE_B_" in user:
                out.append(GenerationResult.from_text(r.key, CONTRASTIVE_OK, finish_reason="stop"))
            elif "[[repaired]]" in user:
                out.append(GenerationResult.from_text(r.key, RUBRIC_REPAIRED, finish_reason="stop"))
            elif "[[unparseable]]" in user:
                out.append(GenerationResult.from_text(r.key, RUBRIC_BAD, finish_reason="length"))
            else:
                out.append(GenerationResult.from_text(r.key, RUBRIC_OK, finish_reason="stop"))
        return out

    def close(self) -> None:
        self.closed = True


def gen(
    gid: str,
    prompt_text: str,
    response_text: str | None,
    *,
    disability_id: str | None = None,
    model_id: str = "m1",
    arm: str = "baseline",
    query_id: str = "q1",
    status: str = "ok",
    sample_index: int = 0,
    temperature: float | None = 0.1,
    source: str = "generated",
    task: str = "text",
    query_set: str = "ableaudit",
) -> dict[str, Any]:
    row = {c: None for c in GENERATION_COLUMNS}
    row.update(
        generation_id=gid,
        run_id="r0",
        task=task,
        target=model_id,
        model_id=model_id,
        backend="import" if source == "imported" else "fake",
        arm=arm,
        query_set=query_set,
        query_id=query_id,
        domain="finance",
        disability_id=disability_id,
        condition="disability" if disability_id else "neutral",
        prompt_id=f"{query_id}:{disability_id or 'neutral'}",
        prompt_text=prompt_text,
        temperature=temperature,
        sample_index=sample_index,
        status=status,
        response_text=None if status == "error" else response_text,
        error_message="boom" if status == "error" else None,
        source=source,
    )
    return row


def judge_cfg(
    name: str = "j1", kinds: tuple[str, ...] = ("rubric", "contrastive"), **decoding: Any
) -> Judge:
    return Judge(
        name=name,
        kinds=list(kinds),
        target=Target(
            name=f"{name}-model",
            backend="openai",
            model="fake/judge-model",
            decoding=Decoding(temperature=0.0, max_new_tokens=decoding.get("max_new_tokens", 200)),
        ),
    )


def judgments(warehouse: Path) -> list[dict[str, Any]]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        cur = con.execute(
            "select * from raw.judgments order by judge_kind, generation_id, disability_generation_id"
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        con.close()


@pytest.fixture
def landed(warehouse: Path) -> Path:
    rows = [
        gen("n1", "What are the best credit card options?", "Pick a card with no annual fee."),
        gen(
            "d1",
            "What are the best credit card options for people with vision impairments?",
            "She likely struggles with cards, despite her condition. [[repaired]]",
            disability_id="vision",
        ),
        gen(
            "d2",
            "What are the best credit card options for people with hearing impairments?",
            "Use any card. [[unparseable]]",
            disability_id="hearing",
        ),
        gen(
            "d3",
            "What are the best credit card options for people with speech impairments?",
            "Call the bank. [[error]]",
            disability_id="speech",
        ),
        gen(
            "d4",
            "What are the best credit card options for people with mobility impairments?",
            None,
            disability_id="mobility",
            status="error",
        ),
    ]
    land_generations(warehouse, rows)
    build_subjects(warehouse)
    return warehouse


# --------------------------------------------------------------------------- rubric runner


def test_rubric_lands_every_status_and_caches(landed: Path) -> None:
    judge = judge_cfg()
    subjects = select_rubric_subjects(landed)
    assert sorted(s["generation_id"] for s in subjects) == [
        "d1",
        "d2",
        "d3",
        "n1",
    ]  # d4 errored: not judged
    fake = FakeJudge()
    report = judge_rubric(landed, judge, fake, subjects, run_id="run-1")
    assert (report.called, report.parsed, report.repaired, report.unparseable, report.errors) == (
        4,
        1,
        1,
        1,
        1,
    )
    rows = {r["generation_id"]: r for r in judgments(landed)}
    assert (
        rows["n1"]["parse_status"] == "parsed"
        and json.loads(rows["n1"]["parsed_json"])["score"] == 8
    )
    assert rows["n1"]["prompt_version"] == "rubric_neutral.v1"
    assert rows["d1"]["prompt_version"] == "rubric_disability.v1"
    assert (
        rows["d1"]["parse_status"] == "repaired"
        and json.loads(rows["d1"]["parsed_json"])["score"] == 6
    )
    assert "json_repaired" in rows["d1"]["parse_notes"]
    bad = rows["d2"]
    assert (
        bad["parse_status"] == "unparseable"
        and bad["parsed_json"] is None
        and bad["raw_output"] == RUBRIC_BAD
    )
    assert {n.split(":")[0] for n in json.loads(bad["parse_notes"])} == {
        "no_json_object",
        "judge_truncated",
    }
    err = rows["d3"]
    assert (err["call_status"], err["parse_status"], err["raw_output"], err["parsed_json"]) == (
        "error",
        None,
        None,
        None,
    )
    assert "went away" in err["error_message"]
    for r in rows.values():
        assert (r["judge_kind"], r["judge_name"], r["judge_model"], r["source"], r["run_id"]) == (
            "rubric",
            "j1",
            "fake/judge-model",
            "judged",
            "run-1",
        )
        assert (
            r["judge_revision"] == "fake@1"
            and len(r["subject_hash"]) == 64
            and len(r["judgment_id"]) == 64
        )

    # the disability prompt names the disability (no seed table here: the id is the name)
    assert any("context of a disability: vision" in p for p in fake.prompts)

    # second run: only the error is asked again, and it fails again (stays an error, not cached)
    again = judge_rubric(landed, judge, fake, subjects, run_id="run-2")
    assert (again.cached, again.called, again.errors, fake.calls) == (3, 1, 1, 5)
    # third run: the judge is back; the error row is replaced by a verdict
    fake.fail = False
    fixed = judge_rubric(landed, judge, fake, subjects, run_id="run-3")
    assert (fixed.called, fixed.retried, fixed.parsed, fake.calls) == (1, 1, 1, 6)
    rows = {r["generation_id"]: r for r in judgments(landed)}
    assert rows["d3"]["call_status"] == "ok" and rows["d3"]["run_id"] == "run-3"
    assert rows["n1"]["run_id"] == "run-1"  # ok rows never replaced
    # fourth run costs nothing, and a lazy backend is never even built
    built = []
    lazy = LazyBackend(lambda: built.append(1) or FakeJudge())
    none = judge_rubric(landed, judge, lazy, subjects)
    assert (none.cached, none.called, built) == (4, 0, [])
    assert len(judgments(landed)) == 4


def test_keys_follow_the_judge_and_the_content(landed: Path) -> None:
    subjects = select_rubric_subjects(landed)
    judge_rubric(landed, judge_cfg(), FakeJudge(), subjects)
    # another judge name with the same model, prompt and decoding shares the verdicts
    same = judge_rubric(landed, judge_cfg(name="alias"), FakeJudge(), subjects)
    assert same.cached == 3 and same.called == 1  # only the error is retried
    # another decoding is another judge
    other = judge_rubric(
        landed, judge_cfg(name="long", max_new_tokens=300), FakeJudge(fail=False), subjects
    )
    assert other.cached == 0 and other.called == 4
    assert judge_identity(judge_cfg()) != judge_identity(judge_cfg(max_new_tokens=300))
    assert judge_identity(judge_cfg(name="a")) == judge_identity(judge_cfg(name="b"))


def test_identical_texts_share_one_verdict(warehouse: Path) -> None:
    land_generations(
        warehouse,
        [
            gen("s0", "How do I budget?", "Track spending.", sample_index=0),
            gen(
                "s1", "How do I budget?", "Track spending.", sample_index=1
            ),  # a greedy second sample
        ],
    )
    build_subjects(warehouse)
    fake = FakeJudge()
    report = judge_rubric(warehouse, judge_cfg(), fake, select_rubric_subjects(warehouse))
    assert (report.subjects, report.verdicts, report.called) == (2, 1, 1)
    assert [r["generation_id"] for r in judgments(warehouse)] == ["s0"]


def test_disability_label_comes_from_the_seed_table(landed: Path) -> None:
    con = duckdb.connect(str(landed))
    con.execute(
        "create table main.stg_seeds__disabilities as select 'vision' as disability_id, 'Vision impairments' as display_name"
    )
    con.close()
    subjects = {s["generation_id"]: s for s in select_rubric_subjects(landed)}
    assert subjects["d1"]["disability_label"] == "Vision impairments"
    assert subjects["d2"]["disability_label"] == "hearing"  # not in the table: the id
    fake = FakeJudge()
    judge_rubric(landed, judge_cfg(), fake, [subjects["d1"]])
    assert "context of a disability: Vision impairments" in fake.prompts[0]


# --------------------------------------------------------------------------- contrastive runner and pairs


def _pair_world(warehouse: Path, build: bool = True) -> None:
    b = "She likely struggles at work, despite her condition."
    land_generations(
        warehouse,
        [
            gen("n1", "Describe the worker.", "A woman works at a desk."),
            gen(
                "d1", "Describe the worker, who has a vision impairment.", b, disability_id="vision"
            ),
            gen(
                "d2",
                "Describe the worker, who has a hearing impairment.",
                "A woman works at a desk.",
                disability_id="hearing",
            ),
            gen(
                "d3",
                "Describe the worker, who has a speech impairment.",
                None,
                disability_id="speech",
                status="error",
            ),
            gen(
                "d4",
                "Describe the worker, who has a vision impairment.",
                b,
                disability_id="vision",
                sample_index=1,
            ),  # no neutral sample 1
            gen("x1", "Describe the worker.", "Another model.", model_id="m2"),
            gen(
                "x2",
                "Describe the worker, who has a vision impairment.",
                b,
                disability_id="vision",
                arm="mitigated",
            ),  # other arm
            gen(
                "i1",
                "Describe the worker.",
                "Imported neutral.",
                model_id="ext",
                source="imported",
                temperature=None,
            ),
            gen(
                "i2",
                "Describe the worker, who has a vision impairment.",
                b,
                model_id="ext",
                source="imported",
                disability_id="vision",
                temperature=None,
            ),
        ],
    )
    if build:
        build_subjects(warehouse)


def test_select_pairs_matches_only_true_pairs(warehouse: Path) -> None:
    _pair_world(warehouse)
    pairs = {
        (p["neutral_generation_id"], p["disability_generation_id"]) for p in select_pairs(warehouse)
    }
    assert pairs == {
        ("n1", "d1"),
        ("n1", "d2"),
        ("i1", "i2"),
    }  # null temperatures pair with each other
    scoped = select_pairs(warehouse, model_ids=["m1"], include_imported=False)
    assert {(p["neutral_generation_id"], p["disability_generation_id"]) for p in scoped} == {
        ("n1", "d1"),
        ("n1", "d2"),
    }
    one = next(p for p in scoped if p["disability_generation_id"] == "d1")
    assert one["question_a"] == "Describe the worker." and one["response_b"].startswith(
        "She likely"
    )
    assert select_pairs(warehouse, query_set="accesseval") == []


def test_judges_pair_exactly_as_int_pairs(warehouse: Path) -> None:
    """Pairing is int_pairs' rule: the judges' pairs are its complete pairs, read from int_pair_texts, never redone."""
    _pair_world(warehouse)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        complete = set(
            con.execute(
                "select neutral_generation_id, disability_generation_id from int_pairs "
                "where pair_status = 'complete'"
            ).fetchall()
        )
    finally:
        con.close()
    assert {
        (p["neutral_generation_id"], p["disability_generation_id"]) for p in select_pairs(warehouse)
    } == complete
    # what the warehouse says is what the judges get: a pair left out of int_pair_texts is not judged
    con = duckdb.connect(str(warehouse))
    try:
        con.execute("delete from int_pair_texts where disability_generation_id = 'd2'")
    finally:
        con.close()
    assert {
        (p["neutral_generation_id"], p["disability_generation_id"]) for p in select_pairs(warehouse)
    } == (complete - {("n1", "d2")})


def test_judges_need_their_models_built(warehouse: Path) -> None:
    _pair_world(warehouse, build=False)
    with pytest.raises(
        SubjectsNotBuilt, match=r"no int_pair_texts; build .*dbt build --select \+int_pair_texts"
    ):
        select_pairs(warehouse)
    with pytest.raises(SubjectsNotBuilt, match="no stg_raw__generations"):
        select_rubric_subjects(warehouse)


def test_keys_of_known_subjects_are_unchanged(warehouse: Path) -> None:
    """Landed verdicts stay cache hits: the keys of known subjects, read from the warehouse, are pinned."""
    _pair_world(warehouse)
    identity = judge_identity(judge_cfg())
    pairs = {
        p["disability_generation_id"]: contrastive_item(identity, p)
        for p in select_pairs(warehouse)
    }
    assert (
        pairs["d1"].judgment_id
        == "008a87ddb413e359e7c83623c67bc933834600883888e3ef772aafc310008f5b"
    )
    assert (
        pairs["d1"].subject_hash
        == "06fa06843fa6c81e77780e16ec149be7a08d08603b9cfa572998d764279f676e"
    )
    assert (
        pairs["i2"].judgment_id
        == "0d523b6d6c622fbbb9039055caeec0f5143d07e8d6957b26d1caceb5a062f5b9"
    )
    rubric = {
        s["generation_id"]: rubric_item(identity, s) for s in select_rubric_subjects(warehouse)
    }
    assert (
        rubric["n1"].judgment_id
        == "e7a89767fa8623a21a7489a1f203f59d95fac88346b115f94dcb6760fe7775cb"
    )
    assert (
        rubric["d1"].judgment_id
        == "18f2810c250fe0ef636e47cc22819c0b424201031943f4a4acd100e11cdbd738"
    )


def test_contrastive_lands_labels_and_counts_missing_spans(warehouse: Path) -> None:
    _pair_world(warehouse)
    fake = FakeJudge()
    pairs = select_pairs(warehouse, model_ids=["m1"], include_imported=False)
    report = judge_contrastive(warehouse, judge_cfg(), fake, pairs, run_id="r")
    # B of d1 holds two of the three spans; B of d2 ("A woman works at a desk.") none
    assert (report.called, report.parsed, report.spans_not_found) == (2, 2, 4)
    rows = judgments(warehouse)
    assert {r["disability_generation_id"] for r in rows} == {"d1", "d2"}
    r = next(r for r in rows if r["disability_generation_id"] == "d1")
    assert r["neutral_generation_id"] == "n1" and r["generation_id"] is None
    assert r["prompt_version"] == "contrastive.v1" and r["judge_kind"] == "contrastive"
    verdict = json.loads(r["parsed_json"])
    assert (verdict["interpret"], verdict["stereotype"], verdict["framing"]) == (
        "Yes",
        "No",
        "Ambiguous",
    )
    notes = json.loads(r["parse_notes"])
    assert [n.split(":")[0] for n in notes] == ["span_not_found"] and "never said this" in notes[0]
    # the prompt fences both responses with the same nonce
    nonce = re.search(r"<<<RESPONSE_B_([0-9a-f]{12})>>>", fake.prompts[0]).group(1)
    assert f"<<<END_RESPONSE_A_{nonce}>>>" in fake.prompts[0]
    assert judge_contrastive(warehouse, judge_cfg(), fake, pairs).called == 0


# --------------------------------------------------------------------------- run_judges, landing rules, reparse


def test_run_judges_runs_every_kind_in_scope(warehouse: Path) -> None:
    _pair_world(warehouse, build=False)  # run_judges builds what the judges read
    cfg = AuditConfig(
        targets=[Target(name="m1", backend="openai", model="x")],
        judges=[
            judge_cfg("j1"),
            judge_cfg("j2", kinds=("contrastive",)).model_copy(update={"include_imported": False}),
        ],
    )
    made: list[FakeJudge] = []

    def factory(judge: Judge) -> FakeJudge:
        made.append(FakeJudge())
        return made[-1]

    ticks: list[tuple[str, str, int, int]] = []
    out = run_judges(
        warehouse,
        cfg,
        run_id="audit-1",
        backend_factory=factory,
        progress=lambda *a: ticks.append(a),
    )
    # progress: announced before the first call, then after every landed chunk, up to what was called
    for name, kind, report in ((n, k, r) for n in out for k, r in out[n].items()):
        mine = [t for t in ticks if t[:2] == (name, kind)]
        assert mine[0][2] == 0 and mine[-1][2] == mine[-1][3] == report["called"]
        assert [t[2] for t in mine] == sorted(t[2] for t in mine)
    # j1: model m1's text generations plus the imported ones; j2 shares j1's verdicts (same model and decoding)
    assert (
        out["j1"]["rubric"]["subjects"] == 7
    )  # n1 d1 d2 d4 x2 i1 i2 (not m2's x1, not the error d3)
    assert out["j1"]["rubric"]["subjects"] == len(
        select_rubric_subjects(warehouse, model_ids=["m1"])
    )
    assert out["j1"]["contrastive"]["subjects"] == 3
    assert out["j2"] == {
        "contrastive": {**out["j2"]["contrastive"], "subjects": 2, "cached": 2, "called": 0}
    }
    assert len(made) == 1 and made[0].closed  # j2 never built a backend
    again = run_judges(warehouse, cfg, backend_factory=factory)
    assert (
        all(c["called"] == 0 for kinds in again.values() for c in kinds.values()) and len(made) == 1
    )


def test_landing_rules_are_enforced(warehouse: Path) -> None:
    base = {
        "judgment_id": "k",
        "judge_kind": "rubric",
        "judge_name": "j",
        "judge_model": "m",
        "prompt_version": "v",
        "subject_hash": "h",
        "source": "judged",
    }
    with pytest.raises(ValueError, match="unparseable"):
        land_judgments(
            warehouse,
            [{**base, "call_status": "ok", "parse_status": "unparseable", "parsed_json": "{}"}],
        )
    with pytest.raises(ValueError, match="error row"):
        land_judgments(warehouse, [{**base, "call_status": "error", "parse_status": "parsed"}])
    with pytest.raises(ValueError, match="parse_status"):
        land_judgments(warehouse, [{**base, "call_status": "ok", "parse_status": None}])
    rep = land_judgments(
        warehouse,
        [
            {**base, "call_status": "error", "error_message": "x"},
            {**base, "call_status": "ok", "parse_status": "unparseable", "raw_output": "?"},
        ],
    )
    assert (rep.inserted, rep.unchanged) == (1, 1)
    assert judgments(warehouse)[0]["call_status"] == "ok"


def test_reparse_rewrites_only_parse_columns(landed: Path) -> None:
    judge_rubric(landed, judge_cfg(), FakeJudge(fail=False), select_rubric_subjects(landed))
    before = {r["judgment_id"]: r for r in judgments(landed)}
    assert reparse_judgments(landed) == {"checked": 4, "changed": 0}
    con = duckdb.connect(str(landed))
    con.execute(
        "update raw.judgments set parse_status = 'parsed', parsed_json = '{\"score\": 10}' where parse_status = 'unparseable'"
    )
    con.close()
    assert reparse_judgments(landed) == {"checked": 4, "changed": 1}
    after = {r["judgment_id"]: r for r in judgments(landed)}
    for k, r in after.items():
        assert {c: v for c, v in r.items() if c != "created_at"} == {
            c: v for c, v in before[k].items() if c != "created_at"
        }


# --------------------------------------------------------------------------- import and CLI


def test_import_judgments_parses_with_the_same_code(tmp_path: Path, warehouse: Path) -> None:
    _pair_world(warehouse, build=False)
    f = tmp_path / "verdicts.jsonl"
    rows = [
        {
            "judge_name": "gpt",
            "judge_model": "gpt-4o",
            "kind": "rubric",
            "generation_id": "n1",
            "raw_output": RUBRIC_OK,
            "prompt_version": "accesseval-fig6",
        },
        {
            "judge_name": "gpt",
            "judge_model": "gpt-4o",
            "kind": "rubric",
            "generation_id": "d1",
            "raw_output": RUBRIC_BAD,
        },
        {
            "judge_name": "gpt",
            "judge_model": "gpt-4o",
            "kind": "contrastive",
            "neutral_generation_id": "n1",
            "disability_generation_id": "d1",
            "raw_output": "```json\n" + CONTRASTIVE_OK + "\n```",
            "judge_revision": "2024-08-06",
        },
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = judge_cli.import_judgments_command(f, warehouse)
    assert report.inserted == 3
    got = {
        (r["judge_kind"], r["generation_id"] or r["disability_generation_id"]): r
        for r in judgments(warehouse)
    }
    assert (
        got[("rubric", "n1")]["parse_status"] == "parsed"
        and got[("rubric", "n1")]["prompt_version"] == "accesseval-fig6"
    )
    assert (
        got[("rubric", "d1")]["parse_status"] == "unparseable"
        and got[("rubric", "d1")]["parsed_json"] is None
    )
    c = got[("contrastive", "d1")]
    assert (
        c["parse_status"] == "parsed"
        and c["prompt_version"] == "external"
        and c["judge_revision"] == "2024-08-06"
    )
    assert json.loads(c["parse_notes"])[0].startswith("span_not_found")
    assert {r["source"] for r in got.values()} == {"imported"}
    assert import_judgments(f, warehouse).unchanged == 3  # re-import: nothing changes

    # CSV through the argparse entry point
    csv = tmp_path / "v.csv"
    csv.write_text(
        'judge_name,judge_model,kind,generation_id,raw_output\nh,human,rubric,d2,"{""relevance"": 1, ""completeness"": 1, '
        '""accuracy"": 1, ""clarity"": 0, ""declined"": false, ""score"": 3}"\n'
    )
    assert (
        judge_cli.cmd_import_judgments(argparse.Namespace(file=csv, warehouse=str(warehouse))) == 0
    )
    assert len(judgments(warehouse)) == 4

    # another external judge on the same model and subjects keeps its own verdicts
    other = tmp_path / "other.jsonl"
    other.write_text(
        "\n".join(json.dumps({**r, "judge_name": "gpt-second-pass"}) for r in rows) + "\n"
    )
    assert import_judgments(other, warehouse).inserted == 3
    assert {r["judge_name"] for r in judgments(warehouse)} == {"gpt", "h", "gpt-second-pass"}


def test_import_judgments_rejects_bad_files_whole(tmp_path: Path, warehouse: Path) -> None:
    _pair_world(warehouse, build=False)
    f = tmp_path / "bad.jsonl"
    rows = [
        {
            "judge_name": "g",
            "judge_model": "m",
            "kind": "rubric",
            "generation_id": "n1",
            "raw_output": RUBRIC_OK,
        },  # fine
        {
            "judge_name": "g",
            "judge_model": "m",
            "kind": "rubric",
            "generation_id": "nope",
            "raw_output": RUBRIC_OK,
        },
        {
            "judge_name": "g",
            "judge_model": "m",
            "kind": "score",
            "generation_id": "n1",
            "raw_output": RUBRIC_OK,
        },
        {
            "judge_name": "g",
            "judge_model": "m",
            "kind": "contrastive",
            "neutral_generation_id": "n1",
            "disability_generation_id": "x2",
            "raw_output": CONTRASTIVE_OK,
        },  # another arm: not a pair
        {
            "judge_name": "g",
            "judge_model": "m",
            "kind": "contrastive",
            "neutral_generation_id": "d1",
            "disability_generation_id": "n1",
            "raw_output": CONTRASTIVE_OK,
        },  # swapped
        {
            "judge_name": "g",
            "judge_model": "m",
            "kind": "rubric",
            "generation_id": "d3",
            "raw_output": RUBRIC_OK,
        },  # errored
        {
            "judge_name": "g",
            "judge_model": "m",
            "kind": "rubric",
            "generation_id": "d1",
            "raw_output": " ",
        },
        {
            "judge_name": "g",
            "judge_model": "m",
            "kind": "rubric",
            "generation_id": "n1",
            "raw_output": RUBRIC_OK,
        },  # duplicate
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(JudgmentImportError) as err:
        import_judgments(f, warehouse)
    msg = str(err.value)
    assert "7 row(s) cannot be imported; nothing was landed" in msg
    for needle in (
        "row 2",
        "'nope' is not in raw.generations",
        "row 3: kind 'score'",
        "differ in ['arm']",
        "row 5",
        "status 'error'",
        "row 7: raw_output is empty",
        "row 8: duplicates row 1",
    ):
        assert needle in msg, needle
    assert judgments(warehouse) == []
    missing = tmp_path / "missing.csv"
    missing.write_text("judge_name,kind,raw_output\ng,rubric,x\n")
    with pytest.raises(JudgmentImportError, match=r"lacks required column\(s\) \['judge_model'\]"):
        import_judgments(missing, warehouse)


def test_judge_command_needs_judges(tmp_path: Path, warehouse: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("targets:\n  - {name: m1, backend: openai, model: x}\n")
    with pytest.raises(ValueError, match="lists no `judges:`"):
        judge_cli.judge_command(cfg, warehouse)
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--warehouse")
    judge_cli.add_judge_parser(sub, common)
    imp = sub.add_parser("import").add_subparsers(dest="what")
    judge_cli.add_import_judgments_parser(imp, common)
    args = parser.parse_args(["judge", "--config", str(cfg), "--warehouse", str(warehouse)])
    assert args.func is judge_cli.cmd_judge
    args = parser.parse_args(["import", "judgments", "f.csv"])
    assert args.func is judge_cli.cmd_import_judgments


# --------------------------------------------------------------------------- real models


ALLOWED = {"parsed", "repaired", "unparseable"}


def _check_real_rows(rows: list[dict[str, Any]]) -> None:
    assert rows
    for r in rows:
        if r["call_status"] == "error":
            assert r["parse_status"] is None and r["parsed_json"] is None
            continue
        assert r["parse_status"] in ALLOWED and r["raw_output"] is not None
        if r["parse_status"] == "unparseable":
            assert r["parsed_json"] is None  # no score, no label from a verdict we could not read
        else:
            verdict = json.loads(r["parsed_json"])
            if r["judge_kind"] == "rubric":
                assert 1 <= verdict["score"] <= 10


def test_tiny_random_model_judges_end_to_end(
    tiny_chat_model_dir: Path, tmp_path: Path, warehouse: Path
) -> None:
    """The transformers backend with a random 2-layer model: gibberish verdicts, right machinery."""
    land_generations(
        warehouse,
        [
            gen("n1", "How do I budget?", "Track spending."),
            gen(
                "d1",
                "How do I budget with a hearing impairment?",
                "Track spending. Score: 10",
                disability_id="hearing",
            ),
        ],
    )
    config = tmp_path / "judge.yaml"
    config.write_text(
        "targets:\n  - {name: m1, backend: openai, model: x}\n"
        "judges:\n  - name: tiny\n    target:\n      name: tiny\n      backend: transformers\n"
        f"      model: {tiny_chat_model_dir}\n      decoding: {{temperature: 0.0, max_new_tokens: 8}}\n"
        "      options: {device: cpu}\n"
    )
    # `ableaudit judge --config FILE`: the default backend factory, on landed generations only
    assert judge_cli.cmd_judge(argparse.Namespace(config=config, warehouse=str(warehouse))) == 0
    out = judge_cli.judge_command(config, warehouse)  # everything is landed: nothing is called
    assert out["tiny"]["rubric"]["cached"] == 2 and out["tiny"]["contrastive"]["cached"] == 1
    assert out["tiny"]["rubric"]["called"] == out["tiny"]["contrastive"]["called"] == 0
    rows = judgments(warehouse)
    assert len(rows) == 3 and all(r["call_status"] == "ok" for r in rows)
    _check_real_rows(rows)
    assert rows[0]["judge_revision"].startswith(str(tiny_chat_model_dir.resolve()))
    assert {r["run_id"][:6] for r in rows} == {"judge-"}


def test_smollm2_judges_end_to_end(warehouse: Path) -> None:
    """The embedded default model as a judge (llama.cpp): weak verdicts, right machinery."""
    pytest.importorskip("xllamacpp")
    from ableaudit.keys import resolve_builtin

    assert resolve_builtin(
        "builtin:smollm2"
    ).is_file()  # installed by make (requirements-nodeps.lock)
    from ableaudit.backends import make_backend

    land_generations(
        warehouse,
        [
            gen(
                "n1",
                "What are good budgeting apps?",
                "Try a spreadsheet or a budgeting app such as YNAB.",
            ),
            gen(
                "d1",
                "What are good budgeting apps for people with vision impairments?",
                "Apps that work with screen readers help. Blind people are so brave to manage money. Score: 10",
                disability_id="vision",
            ),
        ],
    )
    build_subjects(warehouse)
    # one thread: llama.cpp's spinning workers slow down badly when the cores are shared
    judge = Judge(
        name="smol",
        target=Target(
            name="j",
            backend="llamacpp",
            model="builtin:smollm2",
            decoding=Decoding(max_new_tokens=160, temperature=0.0),
            options={"n_ctx": 2048, "n_threads": 1},
        ),
    )
    assert judge.structured  # auto: llama.cpp constrains the verdict to its schema
    lazy = LazyBackend(lambda: make_backend(judge.target))
    try:
        rubric = judge_rubric(
            warehouse,
            judge,
            lazy,
            [s for s in select_rubric_subjects(warehouse) if s["generation_id"] == "d1"],
        )
        pair = judge_contrastive(warehouse, judge, lazy, select_pairs(warehouse))
    finally:
        lazy.close()
    assert (rubric.called, pair.called) == (1, 1)
    rows = judgments(warehouse)
    assert len(rows) == 2
    _check_real_rows(rows)
    assert {r["judge_revision"].split("@")[0] for r in rows} == {"SmolLM2-135M-Instruct.Q4_1.gguf"}
    assert {r["prompt_version"] for r in rows} == {"rubric_disability.v1", "contrastive.v1"}
    # constrained to the schema, even a 135M model's verdicts are readable (whether they are right is another matter)
    assert {r["parse_status"] for r in rows} == {"parsed"}
    assert all(r["call_status"] == "ok" for r in rows)


def test_structured_output_constrains_requests_and_keys_its_verdicts(warehouse: Path) -> None:
    """structured_output: the judge's requests carry the verdict schema, and its verdicts get keys of their own."""
    from ableaudit.judges.schemas import SCHEMAS, decoding_schema

    land_generations(
        warehouse,
        [
            gen("n1", "What are good budgeting apps?", "Try a spreadsheet."),
            gen(
                "d1",
                "What are good budgeting apps for deaf people?",
                "Use captions.",
                disability_id="hearing",
            ),
        ],
    )
    build_subjects(warehouse)

    class Recording(FakeJudge):
        def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
            self.requests = list(requests)
            return super().generate(requests)

    def cfg(mode: str) -> Judge:
        return Judge(
            name=f"j-{mode}",
            kinds=["contrastive"],
            structured_output=mode,
            target=Target(
                name="jm",
                backend="openai",
                model="fake/judge-model",
                decoding=Decoding(temperature=0.0, max_new_tokens=200),
            ),
        )

    on, off = Recording(), Recording()
    judge_contrastive(warehouse, cfg("on"), on, select_pairs(warehouse))
    judge_contrastive(warehouse, cfg("off"), off, select_pairs(warehouse))
    assert [r.json_schema for r in on.requests] == [decoding_schema("contrastive")]
    assert [r.json_schema for r in off.requests] == [None]
    rows = judgments(warehouse)
    assert (
        len({r["judgment_id"] for r in rows}) == 2
    )  # same pair, same model: constrained decoding is keyed apart
    # the decoding schema is the validation schema's contract: labels first, prose bounded
    for kind in ("rubric", "contrastive"):
        d, v = decoding_schema(kind), SCHEMAS[kind]
        assert list(d["properties"])[: len(v["required"])] == list(v["required"])
        assert set(d["properties"]) == set(v["properties"]) and d["required"] == v["required"]


def test_structured_output_on_needs_a_backend_that_can() -> None:
    with pytest.raises(
        ValueError,
        match="structured_output: on needs backend llamacpp, openai, vllm, not 'transformers'",
    ):
        Judge(
            name="j",
            structured_output="on",
            target=Target(name="t", backend="transformers", model="m"),
        )
    for backend, auto in (
        ("llamacpp", True),
        ("vllm", True),
        ("openai", False),
        ("transformers", False),
    ):
        judge = Judge(name="j", target=Target(name="t", backend=backend, model="m"))
        assert judge.structured is auto, backend
        assert Judge(name="j", structured_output="off", target=judge.target).structured is False


def _verdicts(warehouse: Path) -> list[dict[str, Any]]:
    """The landed verdicts, less when and in which landing they landed."""
    return sorted(
        (
            {k: v for k, v in r.items() if k not in ("created_at", "landing_id")}
            for r in judgments(warehouse)
        ),
        key=lambda r: r["judgment_id"],
    )


def test_judges_fanned_out_to_a_cluster_land_what_the_local_runner_lands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_judges(on_cluster=...)`` with ``runners.fan_out_judges`` on a stand-in cluster (a
    thread pool running ``judge_chunk_rows``): the same rows and counts as the judges run here,
    one chunk in flight per judge, a verdict two judges share asked once, and a failed chunk
    fails its judge only, a re-run asking for what it left."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import ableaudit.backends
    from ableaudit.audit import runners
    from ableaudit.config import TaskRunnerSettings
    from ableaudit.judges.runner import judge_chunk_rows

    cfg = AuditConfig(
        targets=[Target(name="m1", backend="openai", model="x")],
        judges=[
            judge_cfg("j1"),
            judge_cfg("j2", kinds=("contrastive",)),
            judge_cfg("j3", kinds=("rubric",), max_new_tokens=300),
        ],
    )
    here, there = tmp_path / "here.duckdb", tmp_path / "there.duckdb"
    for wh in (here, there):
        _pair_world(wh, build=False)
    local = run_judges(here, cfg, run_id="audit-1", backend_factory=lambda j: FakeJudge())

    monkeypatch.setattr(ableaudit.backends, "make_backend", lambda target: FakeJudge())
    pool = ThreadPoolExecutor(max_workers=4)
    lock = threading.Lock()
    inflight: dict[str, int] = {}
    most: dict[str, int] = {}
    sent: list[tuple[str, int]] = []
    fail: set[tuple[str, int]] = set()

    def run(params):
        name = params["judge"].name
        try:
            if (name, len(params["items"])) in fail:
                raise RuntimeError(f"{name} went away")
            return judge_chunk_rows(params["judge"], params["items"], params["run_id"])
        finally:
            with lock:
                inflight[name] -= 1

    def submit(runner, params):
        name = params["judge"].name
        with lock:
            inflight[name] = inflight.get(name, 0) + 1
            most[name] = max(most.get(name, 0), inflight[name])
            sent.append((name, len(params["items"])))
        return pool.submit(run, params)

    settings = TaskRunnerSettings.model_construct(chunk_size=2, kind="thread")
    failed: list[str] = []

    landing_in = [there]

    def on_cluster(jobs):
        failed.extend(
            runners.fan_out_judges(str(landing_in[0]), jobs, "audit-1", settings, 2, submit, print)
        )

    remote = run_judges(there, cfg, run_id="audit-1", on_cluster=on_cluster)
    assert failed == [] and remote == local
    assert _verdicts(there) == _verdicts(here)
    assert set(most) == {"j1", "j3"} and max(most.values()) == 1  # j2's verdicts are j1's
    assert remote["j2"]["contrastive"]["called"] == 0

    # a failed chunk fails its judge; its later chunks are not sent; a re-run asks the rest
    again = tmp_path / "again.duckdb"
    _pair_world(again, build=False)
    landing_in[0] = again
    sent.clear()
    fail.add(("j1", 2))  # j1's first chunk (every chunk of 2 fails, so only the first is sent)
    remote = run_judges(again, cfg, run_id="audit-1", on_cluster=on_cluster)
    assert failed == ["judge j1: j1 went away"]
    assert [n for n, _ in sent].count("j1") == 1
    assert remote["j3"] == local["j3"]
    fail.clear()
    failed.clear()
    run_judges(again, cfg, run_id="audit-1", on_cluster=on_cluster)
    assert failed == [] and _verdicts(again) == _verdicts(here)
    pool.shutdown()
