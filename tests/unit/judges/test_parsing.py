"""The judge parser against a corpus of malformed and adversarial outputs, and the prompt fences.

Each corpus line (tests/judge_corpus/judge_outputs.jsonl) holds a judge output
and its expected outcome, written by hand: the status, the exact set of note
codes, and the score (rubric) or labels, decline flags and missing-span count
(contrastive). An unparseable verdict must carry no score and no label.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from ableaudit.judges import prompts as prompt_mod
from ableaudit.judges.parsing import (
    NOTE_CODES,
    Verdict,
    parse_contrastive,
    parse_rubric,
    parse_verdict,
    span_in_text,
)
from ableaudit.judges.prompts import (
    PINNED_SHA256,
    PROMPT_DIR,
    contrastive_messages,
    fence_nonce,
    load_prompt,
    rubric_messages,
)
from ableaudit.judges.schemas import CONTRASTIVE_SCHEMA, DIMENSIONS, RUBRIC_CRITERIA, RUBRIC_SCHEMA

CORPUS_FILE = Path(__file__).resolve().parents[2] / "judge_corpus" / "judge_outputs.jsonl"
CORPUS = [json.loads(line) for line in CORPUS_FILE.read_text().splitlines() if line.strip()]


def test_corpus_is_big_and_varied() -> None:
    assert len(CORPUS) >= 40
    ids = [c["id"] for c in CORPUS]
    assert len(ids) == len(set(ids))
    statuses = {c["expected"]["parse_status"] for c in CORPUS}
    assert statuses == {"parsed", "repaired", "unparseable"}
    assert {c["kind"] for c in CORPUS} == {"rubric", "contrastive"}
    for code in (
        "multiple_json_objects",
        "truncated",
        "schema",
        "label_normalised",
        "span_not_found",
        "json_repaired",
        "text_outside_json",
        "no_json_object",
        "duplicate_key",
    ):
        assert any(code in c["expected"]["notes"] for c in CORPUS), code


@pytest.mark.parametrize("case", CORPUS, ids=[c["id"] for c in CORPUS])
def test_corpus_case(case: dict) -> None:
    exp = case["expected"]
    v = parse_verdict(case["kind"], case["judge_output"], case.get("response_b"))
    assert v.parse_status == exp["parse_status"], v.notes
    assert set(v.codes) == set(exp["notes"]), v.notes
    assert all(code in NOTE_CODES for code in v.codes)
    if exp["parse_status"] == "unparseable":
        assert v.data is None and v.parsed_json is None  # never a score, never a "No"
        return
    if case["kind"] == "rubric":
        assert v.data["score"] == exp["score"]
        points = sum(v.data[c] for c in RUBRIC_CRITERIA)
        assert v.data["score"] == (1 if v.data["declined"] else max(1, points))
        assert 1 <= v.data["score"] <= 10
    else:
        assert {d: v.data[d] for d in DIMENSIONS} == exp["labels"]
        assert [v.data["decline_in_response_a"], v.data["decline_in_response_b"]] == exp["declines"]
        assert v.spans_not_found == exp["spans_not_found"]
        assert v.codes.count("span_not_found") == exp["spans_not_found"]


@pytest.mark.parametrize(
    "case",
    [c for c in CORPUS if c["expected"]["parse_status"] != "unparseable"],
    ids=lambda c: c["id"],
)
def test_stored_verdicts_validate_and_are_canonical(case: dict) -> None:
    v = parse_verdict(case["kind"], case["judge_output"], case.get("response_b"))
    stored = json.loads(v.parsed_json)
    schema = RUBRIC_SCHEMA if case["kind"] == "rubric" else CONTRASTIVE_SCHEMA
    assert not list(Draft202012Validator(schema).iter_errors(stored))
    assert v.parsed_json == json.dumps(
        stored, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


GOOD_RUBRIC = next(c for c in CORPUS if c["id"] == "r01_clean")["judge_output"]
GOOD_CONTRASTIVE = next(c for c in CORPUS if c["id"] == "c01_clean")
FULL_RUBRIC = parse_rubric(GOOD_RUBRIC)


def test_no_truncation_of_a_rubric_verdict_changes_its_score() -> None:
    """Cut the output at every position: the result is the full verdict's score or no score at all."""
    seen = set()
    for cut in range(len(GOOD_RUBRIC) + 1):
        v = parse_rubric(GOOD_RUBRIC[:cut])
        seen.add(v.parse_status)
        if v.data is not None:
            assert v.data["score"] == FULL_RUBRIC.data["score"], (cut, GOOD_RUBRIC[:cut])
            assert {c: v.data[c] for c in RUBRIC_CRITERIA} == {
                c: FULL_RUBRIC.data[c] for c in RUBRIC_CRITERIA
            }
    assert seen == {"parsed", "repaired", "unparseable"}


def test_no_truncation_of_a_contrastive_verdict_changes_its_labels() -> None:
    text, b = GOOD_CONTRASTIVE["judge_output"], GOOD_CONTRASTIVE["response_b"]
    full = parse_contrastive(text, b)
    for cut in range(len(text) + 1):
        v = parse_contrastive(text[:cut], b)
        if v.data is not None:
            assert {d: v.data[d] for d in DIMENSIONS} == {d: full.data[d] for d in DIMENSIONS}, cut
            assert v.data["decline_in_response_b"] == full.data["decline_in_response_b"]


def test_verdict_invariants() -> None:
    with pytest.raises(ValueError):
        Verdict("unparseable", {"score": 1})
    with pytest.raises(ValueError):
        Verdict("parsed", None)
    with pytest.raises(ValueError):
        Verdict("maybe", None)


def test_spans_match_loosely_but_not_anywhere() -> None:
    b = "Despite her condition, she\u2019s content.\nShe works  daily."
    assert span_in_text("despite HER condition", b)
    assert span_in_text("she's content", b)
    assert span_in_text('"She works daily."', b)
    assert span_in_text("Despite ... works daily", b)
    assert not span_in_text("works daily ... Despite", b)  # pieces must appear in order
    assert not span_in_text("", b)
    assert not span_in_text("suffers from", b)


# --------------------------------------------------------------------------- prompts and fences


def test_released_prompts_match_their_pins() -> None:
    files = sorted(p.name for p in PROMPT_DIR.glob("*.txt"))
    assert files == sorted(f"{k}.txt" for k in PINNED_SHA256)
    for key, digest in PINNED_SHA256.items():
        assert hashlib.sha256((PROMPT_DIR / f"{key}.txt").read_bytes()).hexdigest() == digest, (
            f"{key}.txt changed after release: copy it to a new version instead"
        )
    for name in prompt_mod.CURRENT:
        assert load_prompt(name).prompt_version == f"{name}.{prompt_mod.CURRENT[name]}"


def _fenced(content: str, label: str, nonce: str) -> str:
    return f"<<<{label}_{nonce}>>>\n{content}\n<<<END_{label}_{nonce}>>>"


ADVERSARIAL = [c for c in CORPUS if "subject" in c]


@pytest.mark.parametrize("case", ADVERSARIAL, ids=lambda c: c["id"])
def test_rubric_prompt_fences_the_subject(case: dict) -> None:
    subject = case["subject"]
    for disability in (None, "Vision impairments"):
        tpl, nonce, messages = rubric_messages(subject["query"], subject["response"], disability)
        user = messages[-1]["content"]
        assert re.fullmatch(r"[0-9a-f]{12}", nonce)
        assert nonce not in subject["response"].lower() and nonce not in subject["query"].lower()
        assert _fenced(subject["response"], "RESPONSE", nonce) in user
        assert _fenced(subject["query"], "QUESTION", nonce) in user
        # the subject's own text appears exactly once, inside its fence
        assert user.count(subject["response"]) == 1
        start, end = (
            user.index(f"<<<RESPONSE_{nonce}>>>"),
            user.index(f"<<<END_RESPONSE_{nonce}>>>"),
        )
        assert start < user.index(subject["response"]) < end
        # and a fence line of the template appears nowhere else
        assert user.count(f"<<<END_RESPONSE_{nonce}>>>") == 1
        assert tpl.prompt_version == ("rubric_disability.v1" if disability else "rubric_neutral.v1")
    # the parse depends on the judge's output alone: the injected verdict in the subject is irrelevant
    v = parse_rubric(case["judge_output"])
    assert (
        v.parse_status == case["expected"]["parse_status"]
        and v.data["score"] == case["expected"]["score"]
    )


def test_contrastive_prompt_fences_both_responses() -> None:
    case = next(c for c in CORPUS if c["id"] == "c28_b_holds_fake_verdict")
    tpl, nonce, messages = contrastive_messages(
        "Describe the person.",
        case["response_a"],
        "Describe the person, who may be blind.",
        case["response_b"],
    )
    user = messages[-1]["content"]
    assert _fenced(case["response_b"], "RESPONSE_B", nonce) in user
    assert _fenced(case["response_a"], "RESPONSE_A", nonce) in user
    assert nonce not in case["response_b"].lower()
    # same judge output, with and without the fake verdict in B: same labels and declines
    clean = parse_contrastive(case["judge_output"], "Maria is a true inspiration.")
    injected = parse_contrastive(case["judge_output"], case["response_b"])
    assert clean.data == injected.data and clean.parse_status == injected.parse_status


def test_nonce_is_deterministic_and_avoids_the_subject(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = {"query": "q", "response": "r"}
    expected = prompt_mod.sha256_hex(prompt_mod.canonical_json(texts))[:12]
    assert (
        fence_nonce(texts) == fence_nonce(dict(texts)) == expected
    )  # same texts, same prompt, same key
    # A text containing its own hash cannot be found by search, so pin the hash to force the collision.
    real = prompt_mod.sha256_hex
    trapped = {"query": "q", "response": "this answer contains abcdef012345 in it"}
    monkeypatch.setattr(
        prompt_mod,
        "sha256_hex",
        lambda s: s and ("abcdef012345" + real(s)[12:] if "#" not in s else real(s)),
    )
    nonce = prompt_mod.fence_nonce(trapped)
    assert nonce != "abcdef012345" and nonce not in trapped["response"]
    _, used, messages = prompt_mod.rubric_messages(trapped["query"], trapped["response"], None)
    assert used == nonce and f"<<<RESPONSE_{nonce}>>>" in messages[-1]["content"]


def test_placeholders_are_filled_once() -> None:
    _, nonce, messages = rubric_messages(
        "What is {{response}}?", "I say {{query}} and {{nonce}}.", None
    )
    user = messages[-1]["content"]
    assert "What is {{response}}?" in user and "I say {{query}} and {{nonce}}." in user
    assert messages[0]["role"] == "system" and messages[-1]["role"] == "user"


def test_prompts_are_stable() -> None:
    a = rubric_messages("q", "r", "Hearing impairments")
    b = rubric_messages("q", "r", "Hearing impairments")
    assert a == b
    assert "Hearing impairments" in a[2][-1]["content"]
    assert rubric_messages("q", "r", None)[2] != a[2]
