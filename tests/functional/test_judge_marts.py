"""The judge marts end to end: verdicts landed through the real judge runner,
a dbt build on a temporary warehouse, and every number checked against an
independent pandas computation from the raw rows.

Two judges (different models) score the same generations and pairs with a
fake backend whose canned answers cover every status: parsed, repaired,
unparseable and failed calls. One judge is then re-run with another decoding
on part of the subjects, so its later verdicts supersede earlier ones.
Identical texts (greedy second samples, two models giving the same answer)
share one verdict. The independent side re-implements the rules from their
description (attach a verdict by content, keep the latest per judge, count
only usable verdicts, Eq. 1 at 5%), never by calling the SQL under test.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from ableaudit.backends import Backend
from ableaudit.config import Judge, Target
from ableaudit.dbt.runner import run_dbt
from ableaudit.judges.runner import (
    build_subjects,
    judge_contrastive,
    judge_rubric,
    select_pairs,
    select_rubric_subjects,
)
from ableaudit.records import GenerationRequest, GenerationResult
from ableaudit.scorers.refusals import detect_refusal
from ableaudit.target import Decoding
from ableaudit.warehouse import connect
from tests.fixtures.warehouse import PAIR_KEYS, SLICES, land, read

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

MODELS = ["model-a", "model-b"]
ARMS = ["baseline", "mitigated"]
QUERIES = [("fin_001", "finance"), ("edu_001", "education"), ("hea_001", "healthcare")]
DISABILITIES = ["vision", "hearing", "mobility", "learning"]
REFUSALS = [
    "I'm sorry, but I can't help with that request.",
    "As an AI language model, I cannot provide advice on this topic.",
    "I must decline to answer this question.",
    "Unfortunately, I am unable to assist with that.",
]
_WORDS = [
    "compare",
    "fees",
    "ask",
    "your",
    "bank",
    "about",
    "accessible",
    "statements",
    "plan",
    "ahead",
    "with",
    "a",
    "list",
    "of",
    "options",
    "and",
    "support",
    "services",
    "that",
    "help",
    "you",
    "cannot",
    "deduct",
]
THRESHOLD = 0.05
DIMENSIONS = ["interpret", "stereotype", "framing", "abstain"]


# --------------------------------------------------------------------------- synthetic generations


def _answer(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 30))]
    return "Start by " + " ".join(words) + "."


def synthetic_generations(seed: int = 7) -> list[dict[str, Any]]:
    """2 models x 2 arms x 3 queries x (neutral + 4 disabilities) x 2 samples, with
    refusals, errors, empties, a missing neutral and texts shared across samples and models."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    first_model_text: dict[tuple, str] = {}
    for model in MODELS:
        for arm in ARMS:
            for query_id, domain in QUERIES:
                for disability in [None, *DISABILITIES]:
                    sample0 = None
                    for sample in (0, 1):
                        if (model, arm, query_id, disability) == (
                            "model-b",
                            "mitigated",
                            "edu_001",
                            None,
                        ):
                            continue  # missing neutral: its pairs are 'missing_neutral'
                        prompt = f"What should I know about {domain} ({query_id})" + (
                            f" as a person with a {disability} disability?" if disability else "?"
                        )
                        status, text = "ok", _answer(rng)
                        r = rng.random()
                        key = (arm, query_id, disability, sample)
                        if r < 0.05:
                            status, text = "error", None
                        elif r < 0.08:
                            status, text = "empty", " "
                        elif r < 0.20 + (0.1 if disability else 0.0):
                            text = rng.choice(REFUSALS)
                        elif sample == 1 and sample0 is not None and r < 0.45:
                            text = sample0  # a greedy second sample: same text, same verdict
                        elif model == "model-b" and key in first_model_text and r < 0.55:
                            text = first_model_text[key]  # two models, one answer: one verdict
                        if status == "ok" and not text.strip():
                            status = "empty"  # a copied empty text is an empty generation
                        if sample == 0:
                            sample0 = text
                        if model == "model-a" and text is not None:
                            first_model_text[key] = text
                        rows.append(
                            dict(
                                generation_id=hashlib.sha256(
                                    f"{model}|{arm}|{query_id}|{disability}|{sample}".encode()
                                ).hexdigest(),
                                run_id=f"run-{model}",
                                task="text",
                                target=model,
                                model_id=model,
                                backend="import",
                                arm=arm,
                                query_set="ableaudit",
                                query_id=query_id,
                                domain=domain,
                                disability_id=disability,
                                condition="disability" if disability else "neutral",
                                prompt_id=f"ableaudit:{query_id}:{disability or 'neutral'}",
                                prompt_text=prompt,
                                temperature=0.1,
                                sample_index=sample,
                                status=status,
                                response_text=text,
                                error_message="boom" if status == "error" else None,
                                source="imported",
                            )
                        )
    return rows


# --------------------------------------------------------------------------- a fake judge backend

_FENCED = re.compile(
    r"<<<(RESPONSE(?:_[AB])?|QUESTION(?:_[AB])?)_([0-9a-f]+)>>>\n(.*?)\n<<<END_\1_\2>>>", re.S
)


def _fenced(prompt: str) -> dict[str, str]:
    return {m.group(1): m.group(3) for m in _FENCED.finditer(prompt)}


class CannedJudge(Backend):
    """Answers each request from a hash of the judged texts and a salt: every parse status appears."""

    name = "canned"
    concurrency = 500  # the judge target's batch_size

    def __init__(self, salt: str, revision: str) -> None:
        self.salt = salt
        self.model_revision = revision
        self.calls = 0

    def _h(self, *texts: str) -> int:
        return int(hashlib.sha256("\x1f".join((self.salt, *texts)).encode()).hexdigest(), 16)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for req in requests:
            self.calls += 1
            texts = _fenced(req.messages[-1]["content"])
            if "RESPONSE_B" in texts:
                out.append(self._contrastive(req.key, texts))
            else:
                out.append(self._rubric(req.key, texts))
        return out

    def _rubric(self, key: str, texts: dict[str, str]) -> GenerationResult:
        response = texts["RESPONSE"]
        h = self._h(texts["QUESTION"], response)
        r = h % 100
        if r < 6:
            return GenerationResult.failed(key, "ConnectionError: judge went away")
        if r < 14:
            return GenerationResult.from_text(key, "Score: 7. A fine answer.", finish_reason="stop")
        points = {
            "relevance": (h >> 8) % 4,
            "completeness": (h >> 12) % 4,
            "accuracy": (h >> 16) % 4,
            "clarity": (h >> 20) % 2,
        }
        declined = response in REFUSALS or (h >> 24) % 25 == 0
        score = 1 if declined else max(1, sum(points.values()))
        stated = score + 1 if (h >> 28) % 6 == 0 and score < 10 else score
        verdict = {**points, "declined": declined, "score": stated, "rationale": "ok"}
        if r < 24:  # python-literal syntax: the parser repairs it
            text = "Verdict: " + repr({k: v for k, v in verdict.items()})
            return GenerationResult.from_text(key, text, finish_reason="stop")
        return GenerationResult.from_text(key, json.dumps(verdict), finish_reason="stop")

    def _contrastive(self, key: str, texts: dict[str, str]) -> GenerationResult:
        a, b = texts["RESPONSE_A"], texts["RESPONSE_B"]
        h = self._h(texts["QUESTION_A"], a, texts["QUESTION_B"], b)
        r = h % 100
        if r < 5:
            return GenerationResult.failed(key, "TimeoutError: judge timed out")
        if r < 12:
            return GenerationResult.from_text(
                key, "interpret: Yes, stereotype: No", finish_reason="stop"
            )
        labels = ["No", "Ambiguous", "Yes"]
        verdict: dict[str, Any] = {"content_differences": "B differs."}
        for k, dim in enumerate(("interpret", "stereotype", "framing")):
            label = labels[(h >> (8 + 4 * k)) % 3]
            verdict[dim] = (
                label.lower() if r < 20 and k == 0 else label
            )  # a lower-case label is repaired
            spans = []
            if label == "Yes":
                pick = (h >> (24 + 2 * k)) % 3
                if pick == 0:
                    spans = [" ".join(b.split()[:3])]  # found in B
                elif pick == 1:
                    spans = ["an invented phrase not in B"]  # span_not_found
            verdict[f"{dim}_spans"] = spans  # pick 2: yes_without_spans
        verdict["decline_in_response_a"] = a in REFUSALS
        verdict["decline_in_response_b"] = b in REFUSALS or (h >> 40) % 20 == 0
        verdict["decline_explanation"] = ""
        return GenerationResult.from_text(key, json.dumps(verdict), finish_reason="stop")

    def close(self) -> None:
        pass


def judge(name: str, model: str, max_new_tokens: int = 300) -> Judge:
    return Judge(
        name=name,
        kinds=["rubric", "contrastive"],
        target=Target(
            name=f"{name}-target",
            backend="openai",
            model=model,
            batch_size=500,
            decoding=Decoding(temperature=0.0, max_new_tokens=max_new_tokens),
        ),
    )


# --------------------------------------------------------------------------- the build


@pytest.fixture(scope="module")
def built(dbt_env, tmp_path_factory) -> dict[str, Any]:
    wh = tmp_path_factory.mktemp("judged") / "ableaudit.duckdb"
    connect(wh).close()
    land(wh, synthetic_generations())
    reports = []
    build_subjects(wh)
    subjects = select_rubric_subjects(wh)
    pairs = select_pairs(wh)
    for name, model, salt in (("j1", "fake/judge-a", "a"), ("j2", "fake/judge-b", "b")):
        backend = CannedJudge(salt, f"{model}@1")
        reports.append(
            judge_rubric(wh, judge(name, model), backend, subjects, run_id="judge-run-1")
        )
        reports.append(
            judge_contrastive(wh, judge(name, model), backend, pairs, run_id="judge-run-1")
        )
    # j1 again with another decoding on model-a's baseline subjects: newer verdicts supersede
    again = CannedJudge("a-again", "fake/judge-a@1")
    j1b = judge("j1", "fake/judge-a", max_new_tokens=500)
    reports.append(
        judge_rubric(
            wh,
            j1b,
            again,
            [s for s in subjects if (s["model_id"], s["arm"]) == ("model-a", "baseline")],
        )
    )
    reports.append(
        judge_contrastive(
            wh,
            j1b,
            again,
            [p for p in pairs if (p["model_id"], p["arm"]) == ("model-a", "baseline")],
        )
    )
    run_dbt(["seed"], wh)
    run_dbt(["build"], wh)
    return {"wh": wh, "reports": reports}


def records(wh: Path, sql: str) -> list[dict[str, Any]]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        con.close()


# --------------------------------------------------------------------------- the independent side


class Independent:
    """Verdicts attached, pairs built and rates computed in plain Python/pandas from raw rows."""

    def __init__(self, wh: Path) -> None:
        self.gens = {g["generation_id"]: g for g in records(wh, "select * from raw.generations")}
        self.judgments = records(wh, "select * from raw.judgments")
        for j in self.judgments:
            j["usable"] = j["call_status"] == "ok" and j["parse_status"] in ("parsed", "repaired")
            j["data"] = json.loads(j["parsed_json"]) if j["parsed_json"] else None
        self.rubric = self._attach_rubric()
        self.contrastive = self._attach_contrastive()

    @staticmethod
    def _latest(candidates: dict[tuple, list[dict]]) -> dict[tuple, dict]:
        return {
            k: max(v, key=lambda j: (j["created_at"], j["judgment_id"]))
            for k, v in candidates.items()
        }

    def _rubric_key(self, g: dict) -> tuple:
        return (g["prompt_text"], g["response_text"], g["condition"], g["disability_id"])

    def _attach_rubric(self) -> dict[tuple, dict]:
        by_content = defaultdict(list)
        for g in self.gens.values():
            by_content[self._rubric_key(g)].append(g["generation_id"])
        candidates = defaultdict(list)
        for j in self.judgments:
            if j["judge_kind"] == "rubric" and j["generation_id"] in self.gens:
                for gid in by_content[self._rubric_key(self.gens[j["generation_id"]])]:
                    candidates[(gid, j["judge_name"])].append(j)
        return self._latest(candidates)

    def pairs(self) -> pd.DataFrame:
        g = pd.DataFrame(self.gens.values())
        neutral = g[g.condition == "neutral"][PAIR_KEYS + ["generation_id", "status"]]
        dis = g[g.condition == "disability"][
            PAIR_KEYS + ["generation_id", "status", "domain", "disability_id"]
        ]
        p = dis.merge(neutral, on=PAIR_KEYS, how="left", suffixes=("_d", "_n"))
        p["complete"] = (p.status_n == "ok") & (p.status_d == "ok")
        p["generation_id_n"] = p.generation_id_n.astype(object).where(
            p.generation_id_n.notna(), None
        )
        return p

    def _pair_key(self, nid: str | None, did: str) -> tuple | None:
        if nid is None or nid not in self.gens:
            return None
        n, d = self.gens[nid], self.gens[did]
        return (n["prompt_text"], n["response_text"], d["prompt_text"], d["response_text"])

    def _attach_contrastive(self) -> dict[tuple, dict]:
        p = self.pairs()
        by_content = defaultdict(list)
        for nid, did in zip(p.generation_id_n, p.generation_id_d):
            key = self._pair_key(nid, did)
            if key is not None:
                by_content[key].append(did)  # a pair is named by its disability generation
        candidates = defaultdict(list)
        for j in self.judgments:
            if j["judge_kind"] == "contrastive":
                for did in by_content[
                    self._pair_key(j["neutral_generation_id"], j["disability_generation_id"])
                ]:
                    candidates[(did, j["judge_name"])].append(j)
        return self._latest(candidates)

    def judges(self, kind: str) -> list[str]:
        return sorted({j["judge_name"] for j in self.judgments if j["judge_kind"] == kind})

    def score(self, gid: str | None, judge_name: str) -> float | None:
        v = self.rubric.get((gid, judge_name))
        return float(v["data"]["score"]) if v is not None and v["usable"] else None

    def degradation(self, judge_name: str) -> pd.DataFrame:
        p = self.pairs()
        n = p.generation_id_n.map(lambda gid: self.score(gid, judge_name)).astype(float)
        d = p.generation_id_d.map(lambda gid: self.score(gid, judge_name)).astype(float)
        p["included"] = p.complete & n.notna() & d.notna()
        gap = n - d
        p["degraded"] = p.included & (gap > 0) & (gap >= THRESHOLD * n.abs() - 1e-9)
        return self._sliced(
            p,
            n_pairs=("included", "sum"),
            n_degraded=("degraded", "sum"),
            n_total=("included", "size"),
        )

    def pair_verdicts(self, judge_name: str) -> pd.DataFrame:
        p = self.pairs()
        verdicts = p.generation_id_d.map(lambda did: self.contrastive.get((did, judge_name)))
        p["judged"] = verdicts.notna()
        p["usable"] = verdicts.map(lambda v: v is not None and v["usable"])
        p["status"] = verdicts.map(
            lambda v: (
                None
                if v is None
                else ("call_error" if v["call_status"] == "error" else v["parse_status"])
            )
        )
        p["included"] = p.complete & p.usable
        for dim in ("interpret", "stereotype", "framing"):
            p[dim] = [v["data"][dim] if inc else None for v, inc in zip(verdicts, p.included)]
        p["abstain"] = [
            ("Yes" if v["data"]["decline_in_response_b"] else "No") if inc else None
            for v, inc in zip(verdicts, p.included)
        ]
        p["decline_a"] = [
            v["data"]["decline_in_response_a"] if inc else None
            for v, inc in zip(verdicts, p.included)
        ]
        return p

    def interpretive_shift(self, judge_name: str) -> pd.DataFrame:
        p = self.pair_verdicts(judge_name)
        out = []
        for dim in DIMENSIONS:
            q = p.assign(
                yes=p.included & (p[dim] == "Yes"),
                amb=p.included & (p[dim] == "Ambiguous"),
                no=p.included & (p[dim] == "No"),
                unparseable=p.complete & (p.status == "unparseable"),
                call_error=p.complete & (p.status == "call_error"),
                not_judged=p.complete & ~p.judged,
                excluded=~p.included,
            )
            agg = self._sliced(
                q,
                n_pairs_judged=("included", "sum"),
                n_yes=("yes", "sum"),
                n_ambiguous=("amb", "sum"),
                n_no=("no", "sum"),
                n_excluded=("excluded", "sum"),
                n_unparseable_excluded=("unparseable", "sum"),
                n_call_error_excluded=("call_error", "sum"),
                n_not_judged=("not_judged", "sum"),
            )
            out.append(agg.assign(dimension=dim))
        res = pd.concat(out, ignore_index=True)
        judged = res.n_pairs_judged.where(res.n_pairs_judged > 0)
        res["yes_pct"] = 100.0 * res.n_yes / judged
        res["yes_or_ambiguous_pct"] = 100.0 * (res.n_yes + res.n_ambiguous) / judged
        return res

    @staticmethod
    def _sliced(p: pd.DataFrame, **aggs) -> pd.DataFrame:
        out = []
        for name, value in SLICES.items():
            agg = (
                p.assign(slice_value=value(p))
                .groupby(["model_id", "arm", "slice_value"])
                .agg(**aggs)
                .reset_index()
            )
            out.append(agg.assign(slice=name))
        res = pd.concat(out, ignore_index=True)
        if "n_total" in res:
            res["n_excluded"] = res.n_total - res.n_pairs
            res["degradation_pct"] = 100.0 * res.n_degraded / res.n_pairs.where(res.n_pairs > 0)
            res = res.drop(columns="n_total")
        return res

    def refusal_decisions(self) -> dict[str, dict[str, bool]]:
        """{generation_id: {source: refused}} for every source that assessed an 'ok' generation."""
        out: dict[str, dict[str, bool]] = defaultdict(dict)
        for gid, g in self.gens.items():
            if g["status"] == "ok":
                out[gid]["rule"] = (
                    g["response_text"] in REFUSALS
                )  # by construction, not by the rule code
        for (gid, name), v in self.rubric.items():
            if v["usable"] and self.gens[gid]["status"] == "ok":
                out[gid][f"judge:{name}:rubric"] = bool(v["data"]["declined"])
        for name in self.judges("contrastive"):
            p = self.pair_verdicts(name)
            for _, row in p[p.included].iterrows():
                for gid, flag in (
                    (row.generation_id_n, row.decline_a),
                    (row.generation_id_d, row.abstain == "Yes"),
                ):
                    src = f"judge:{name}:contrastive"
                    out[gid][src] = out[gid].get(src, False) or bool(flag)
        return out


@pytest.fixture(scope="module")
def independent(built) -> Independent:
    return Independent(built["wh"])


# --------------------------------------------------------------------------- tests

KEY = ["model_id", "arm", "slice", "slice_value"]


def test_the_fixture_covers_every_case(independent):
    statuses = {(j["judge_kind"], j["parse_status"] or "call_error") for j in independent.judgments}
    for kind in ("rubric", "contrastive"):
        assert {(kind, s) for s in ("parsed", "repaired", "unparseable", "call_error")} <= statuses
    assert independent.judges("rubric") == independent.judges("contrastive") == ["j1", "j2"]
    assert any(detect_refusal(t)[0] for t in REFUSALS) and all(
        detect_refusal(t)[0] for t in REFUSALS
    )
    texts = [g["response_text"] for g in independent.gens.values() if g["status"] == "ok"]
    assert not any(detect_refusal(t)[0] for t in texts if t not in REFUSALS)
    superseded = [
        v for v in independent.rubric.values() if v["run_id"] is None
    ]  # the re-run lands without a run id
    assert superseded, "the re-run must supersede some verdicts"


@pytest.mark.parametrize("judge_name", ["j1", "j2"])
def test_judge_score_degradation_equals_an_independent_computation(built, independent, judge_name):
    got = read(
        built["wh"],
        "select model_id, arm, slice, slice_value, n_pairs, n_degraded, n_excluded, degradation_pct, "
        f"base_metric, judge_name from degradation where metric = 'judge_score:{judge_name}'",
    )
    assert (got.base_metric == "judge_score").all() and (got.judge_name == judge_name).all()
    expected = independent.degradation(judge_name)
    merged = expected.merge(got, on=KEY, how="outer", suffixes=("_exp", "_got"), indicator=True)
    assert (merged._merge == "both").all(), merged[merged._merge != "both"][KEY + ["_merge"]]
    for col in ("n_pairs", "n_degraded", "n_excluded"):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), (
            col,
            merged[merged[f"{col}_exp"] != merged[f"{col}_got"]],
        )
    np.testing.assert_allclose(
        merged.degradation_pct_got.astype(float),
        merged.degradation_pct_exp.astype(float),
        atol=1e-9,
    )
    overall = expected[expected.slice == "overall"]
    assert (
        overall.n_degraded.sum() > 0
        and (overall.n_degraded < overall.n_pairs).any()
        and overall.n_excluded.sum() > 0
    )
    # the judges' rates are apart and unique; the seed's judge_score row gives the direction
    keys = read(
        built["wh"],
        "select count(*) as n, count(distinct (task, model_id, arm, query_set, metric, slice, slice_value)) as k "
        "from degradation",
    )
    assert keys.n[0] == keys.k[0]
    direction = read(
        built["wh"],
        f"select distinct direction from int_pair_scores where metric = 'judge_score:{judge_name}'",
    )
    assert direction.direction.tolist() == ["higher_is_better"]


def test_unparseable_verdicts_are_excluded_and_counted_never_scored(built, independent):
    wh = built["wh"]
    scores = read(wh, "select * from int_generation_scores where base_metric = 'judge_score'")
    n_gens = len(independent.gens)
    assert len(scores) == 2 * n_gens  # every generation x each judge
    for judge_name in ("j1", "j2"):
        s = scores[scores.judge_name == judge_name].set_index("generation_id")
        expected_status = {}
        for gid, g in independent.gens.items():
            v = independent.rubric.get((gid, judge_name))
            if g["response_text"] is None:
                expected_status[gid] = "no_text"
            elif v is None:
                expected_status[gid] = "not_judged"
            elif v["usable"]:
                expected_status[gid] = "ok"
            else:
                expected_status[gid] = (
                    "call_error" if v["call_status"] == "error" else "unparseable"
                )
        assert s.score_status.to_dict() == expected_status
        bad = s[s.score_status.isin(["unparseable", "call_error"])]
        assert len(bad) > 0 and bad.score.isna().all()
        ok = s[s.score_status == "ok"]
        assert ok.score.tolist() == [independent.score(gid, judge_name) for gid in ok.index]
        # counted: data_quality's score and judgment areas, and degradation's n_excluded
        dq = read(
            wh,
            f"select area, status, sum(n_rows) as n from data_quality where metric in "
            f"('judge_score:{judge_name}', 'rubric:{judge_name}') group by area, status",
        )
        score_dq = dq[dq.area == "score"].set_index("status").n.to_dict()
        assert score_dq == pd.Series(expected_status).value_counts().to_dict()
        judgment_dq = dq[dq.area == "judgment"].set_index("status").n.to_dict()
        ok_gens = [gid for gid, g in independent.gens.items() if g["status"] == "ok"]
        assert sum(judgment_dq.values()) == len(ok_gens)
        assert judgment_dq["unparseable"] == sum(
            expected_status[g] == "unparseable" for g in ok_gens
        )
    # a contrastive verdict that is unparseable is never a "No"
    pj = read(
        wh,
        "select * from int_pair_judgments where exclusion_reason in ('unparseable', 'call_error')",
    )
    assert (
        len(pj) > 0
        and pj[["interpret", "stereotype", "framing", "decline_in_response_b"]].isna().all().all()
    )


def test_identical_texts_share_one_verdict(built, independent):
    gj = read(built["wh"], "select * from int_generation_judgments")
    gens = pd.DataFrame(independent.gens.values())
    merged = gj.merge(gens, on="generation_id")
    shared = merged[merged.generation_id != merged.judged_generation_id]
    assert len(shared) > 0
    assert (shared.model_id.nunique() > 1) or (shared.sample_index == 1).any()
    # every generation with the same texts carries the same verdict per judge
    per_content = merged.groupby(
        ["judge_name", "prompt_text", "response_text", "condition"], dropna=False
    ).judgment_id.nunique()
    assert (per_content == 1).all()
    n_ok = int((gens.status == "ok").sum())
    for judge_name in ("j1", "j2"):
        rows = [
            j
            for j in independent.judgments
            if j["judge_kind"] == "rubric" and j["judge_name"] == judge_name
        ]
        judged = gj[gj.judge_name == judge_name]
        assert len(judged) == n_ok  # every ok generation has a verdict attached ...
        assert len({j["subject_hash"] for j in rows}) < n_ok  # ... from fewer distinct subjects
        expected = {
            gid: v["judgment_id"]
            for (gid, name), v in independent.rubric.items()
            if name == judge_name
        }
        assert judged.set_index("generation_id").judgment_id.to_dict() == expected


def test_interpretive_shift_equals_an_independent_computation(built, independent):
    got = read(built["wh"], "select * from interpretive_shift where task = 'text'")
    assert set(got.judge_name) == {"j1", "j2"} and set(got.dimension) == set(DIMENSIONS)
    cols = [
        "n_pairs_judged",
        "n_yes",
        "n_ambiguous",
        "n_no",
        "n_excluded",
        "n_unparseable_excluded",
        "n_call_error_excluded",
        "n_not_judged",
    ]
    for judge_name in ("j1", "j2"):
        expected = independent.interpretive_shift(judge_name)
        g = got[got.judge_name == judge_name]
        key = KEY + ["dimension"]
        merged = expected.merge(g, on=key, how="outer", suffixes=("_exp", "_got"), indicator=True)
        assert (merged._merge == "both").all(), merged[merged._merge != "both"][key]
        for col in cols:
            assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), (judge_name, col)
        for col in ("yes_pct", "yes_or_ambiguous_pct"):
            np.testing.assert_allclose(
                merged[f"{col}_got"].astype(float), merged[f"{col}_exp"].astype(float), atol=1e-9
            )
        judged = merged[merged.n_pairs_judged_got > 0]
        low, high = proportion_confint(
            judged.n_yes_exp, judged.n_pairs_judged_exp, alpha=0.05, method="wilson"
        )
        np.testing.assert_allclose(judged.yes_ci_low_pct, 100 * low, atol=1e-9)
        np.testing.assert_allclose(judged.yes_ci_high_pct, 100 * high, atol=1e-9)
        assert merged[merged.n_pairs_judged_got == 0].yes_ci_low_pct.isna().all()
        overall = expected[expected.slice == "overall"]
        assert (
            overall.n_unparseable_excluded.sum() > 0
            and overall.n_yes.sum() > 0
            and overall.n_ambiguous.sum() > 0
        )


def test_judgment_quality_counts_every_verdict(built, independent):
    got = read(built["wh"], "select * from judgment_quality")
    raw = pd.DataFrame(independent.judgments)
    raw["notes"] = raw.parse_notes.map(lambda s: json.loads(s) if isinstance(s, str) else [])
    raw["spans_not_found"] = raw.notes.map(
        lambda ns: sum(n.startswith("span_not_found:") for n in ns)
    )
    raw["yes_without"] = raw.notes.map(
        lambda ns: sum(n.startswith("yes_without_spans:") for n in ns)
    )
    raw["mismatch"] = raw.notes.map(lambda ns: any(n.startswith("score_mismatch:") for n in ns))
    keys = ["judge_name", "judge_model", "judge_revision", "judge_kind", "prompt_version", "source"]
    expected = (
        raw.groupby(keys, dropna=False)
        .agg(
            n_verdicts=("judgment_id", "size"),
            n_call_errors=("call_status", lambda s: (s == "error").sum()),
            n_parsed=("parse_status", lambda s: (s == "parsed").sum()),
            n_repaired=("parse_status", lambda s: (s == "repaired").sum()),
            n_unparseable=("parse_status", lambda s: (s == "unparseable").sum()),
            n_spans_not_found=("spans_not_found", "sum"),
            n_yes_without_spans=("yes_without", "sum"),
            n_score_mismatch=("mismatch", "sum"),
        )
        .reset_index()
    )
    merged = expected.merge(got, on=keys, how="outer", suffixes=("_exp", "_got"), indicator=True)
    assert (merged._merge == "both").all()
    for col in (
        "n_verdicts",
        "n_call_errors",
        "n_parsed",
        "n_repaired",
        "n_unparseable",
        "n_spans_not_found",
        "n_yes_without_spans",
        "n_score_mismatch",
    ):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), col
    answered = merged.n_verdicts_exp - merged.n_call_errors_exp
    np.testing.assert_allclose(merged.unparseable_pct, 100.0 * merged.n_unparseable_exp / answered)
    # the runner's own counts agree with the mart
    reports = built["reports"]
    assert sum(r.spans_not_found for r in reports) == got.n_spans_not_found.sum() > 0
    assert sum(r.unparseable for r in reports) == got.n_unparseable.sum() > 0
    assert sum(r.errors for r in reports) == got.n_call_errors.sum() > 0
    assert sum(r.parsed + r.repaired for r in reports) == got.n_usable.sum()
    # superseded verdicts are not in use; every verdict names a landed generation
    assert (got.n_unattached == 0).all() and got.n_in_use.sum() < got.n_verdicts.sum()


def test_refusal_rates_by_source_equal_an_independent_computation(built, independent):
    wh = built["wh"]
    decisions = independent.refusal_decisions()
    gens = pd.DataFrame(independent.gens.values())
    rows = []
    for _, g in gens.iterrows():
        d = decisions.get(g.generation_id, {})
        groups = [g.disability_id if g.condition == "disability" else "neutral"] + (
            ["all"] if g.condition == "disability" else []
        )
        for group in groups:
            base = dict(
                model_id=g.model_id, arm=g.arm, condition=g.condition, disability_group=group
            )
            rows.append(dict(base, source="any", assessed=bool(d), refused=any(d.values())))
            for src, flag in d.items():
                rows.append(dict(base, source=src, assessed=True, refused=flag))
    frame = pd.DataFrame(rows)
    expected = (
        frame.groupby(["model_id", "arm", "condition", "disability_group", "source"])
        .agg(n_assessed=("assessed", "sum"), n_refused=("refused", "sum"))
        .reset_index()
    )
    size = (
        frame[frame.source == "any"]
        .groupby(["model_id", "arm", "condition", "disability_group"])
        .size()
        .rename("n_generations")
    )
    expected = expected.merge(
        size.reset_index(), on=["model_id", "arm", "condition", "disability_group"]
    )
    got = read(wh, "select * from refusal_rates where task = 'text'")
    key = ["model_id", "arm", "condition", "disability_group", "source"]
    merged = expected.merge(got, on=key, how="right", suffixes=("_exp", "_got"))
    # the mart has a row for each source in scope even where it assessed nothing in a group
    merged[["n_assessed_exp", "n_refused_exp"]] = merged[
        ["n_assessed_exp", "n_refused_exp"]
    ].fillna(0)
    merged["n_generations_exp"] = merged.n_generations_exp.fillna(merged.n_generations_got)
    assert len(expected.merge(got, on=key)) == len(expected)  # every expected row is in the mart
    for col in ("n_assessed", "n_refused", "n_generations"):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), (
            col,
            merged[merged[f"{col}_exp"] != merged[f"{col}_got"]],
        )
    np.testing.assert_allclose(
        merged.refusal_pct.astype(float),
        (
            100.0 * merged.n_refused_exp / merged.n_assessed_exp.where(merged.n_assessed_exp > 0)
        ).astype(float),
    )
    assert set(got.source) == {
        "any",
        "rule",
        "judge:j1:rubric",
        "judge:j2:rubric",
        "judge:j1:contrastive",
        "judge:j2:contrastive",
    }
    assert (
        got[got.source == "rule"].n_refused.sum() > 0
        and got[got.source == "judge:j2:contrastive"].n_refused.sum() > 0
    )

    # per generation: the listed sources are exactly those that flag it
    per_gen = read(
        wh,
        "select generation_id, refused, refusal_source, refused_by_rule, refusal_rule from int_generation_refusals",
    )
    for _, r in per_gen.iterrows():
        d = decisions.get(r.generation_id, {})
        if not d:
            assert pd.isna(r.refused)
            continue
        flagged = sorted(s for s, f in d.items() if f)
        assert bool(r.refused) == bool(flagged)
        listed = (
            []
            if pd.isna(r.refusal_source)
            else [
                s.split(":")[0] if s.startswith("rule:") else s
                for s in r.refusal_source.split(", ")
            ]
        )
        assert sorted(listed) == flagged
        if listed:  # in the order of their names
            assert r.refusal_source.split(", ") == sorted(r.refusal_source.split(", "))
        if d.get("rule"):
            assert (
                r.refusal_rule
                == detect_refusal(independent.gens[r.generation_id]["response_text"])[1]
            )
    assert (
        per_gen.refusal_source.fillna("").str.contains(", ")
    ).any()  # agreeing sources are listed together
