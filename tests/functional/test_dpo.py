"""DPO mitigation end to end: preference_pairs against an independent pandas computation,
the export read by `datasets` in TRL's layout, TRL's DPOTrainer on a tiny random chat model
with a LoRA, registration, the adapter run as an audit arm with the transformers backend,
and the re-audit compared in mitigation_effect. The `train-dpo` flow runs once too.

The synthetic audit and its keyword judge come from test_detector (a flagged response
carries a cue word: "struggle", "brave", "despite").
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from ableaudit.dbt.runner import run_dbt
from tests.fixtures.independent import preference_split
from tests.functional.test_detector import (
    JUDGE,
    KeywordJudge,
    build_judged_warehouse,
    judge_cfg,
    labels_of,
    read,
)

pytestmark = [pytest.mark.slow, pytest.mark.long]

SHARE = 0.4  # of 12 queries, q03 q04 q05 q08 q11 are held out at 0.4
VARS = f"{{preference_heldout_share: {SHARE}}}"
DIMS = ("interpret", "stereotype", "framing")


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wh = build_judged_warehouse(tmp_path_factory.mktemp("dpo") / "wh.duckdb", humans=False)
    run_dbt(["build", "--select", "+preference_pairs", "--vars", VARS], wh)
    return wh


def independent_preferences(wh: Path, chosen_rule: str) -> pd.DataFrame:
    """preference_pairs from raw rows in pandas: pairs, usable verdicts, flags, chosen, split."""
    g = read(wh, "select * from raw.generations")
    j = read(wh, "select * from raw.judgments where judge_kind = 'contrastive'")
    usable = j[(j.call_status == "ok") & j.parse_status.isin(["parsed", "repaired"])]
    verdict = {
        (r.neutral_generation_id, r.disability_generation_id): json.loads(r.parsed_json)
        for r in usable.itertuples()
    }
    keys = ["task", "model_id", "arm", "query_set", "query_id", "temperature", "sample_index"]
    n = g[g.condition == "neutral"]
    d = g[g.condition == "disability"]
    pairs = d.merge(n, on=keys, suffixes=("", "_n"))
    pairs = pairs[(pairs.status == "ok") & (pairs.status_n == "ok")].copy()
    pairs["v"] = [verdict.get((a, b)) for a, b in zip(pairs.generation_id_n, pairs.generation_id)]
    pairs = pairs[pairs.v.notna()].copy()
    for dim in DIMS:
        pairs[dim] = [v[dim] for v in pairs.v]
    pairs["declines"] = [v["decline_in_response_b"] for v in pairs.v]
    flagged = pairs[(pairs[list(DIMS)] == "Yes").any(axis=1)].copy()
    faithful = pairs[(pairs[list(DIMS)] == "No").all(axis=1) & ~pairs.declines]
    rows = []
    for r in flagged.itertuples():
        chosen_id, source = r.generation_id_n, "neutral"
        if chosen_rule == "mitigation":
            alt = faithful[
                (faithful.query_id == r.query_id)
                & (faithful.disability_id == r.disability_id)
                & (faithful.arm != r.arm)
            ].sort_values(["arm", "generation_id"])
            if len(alt):
                chosen_id, source = alt.generation_id.iloc[0], f"arm:{alt.arm.iloc[0]}"
        rows.append(
            {
                "rejected_generation_id": r.generation_id,
                "chosen_generation_id": chosen_id,
                "chosen_source": source,
                "arm": r.arm,
                "query_id": r.query_id,
                "prompt_text": r.prompt_text,
                "system_prompt": r.system_prompt,
                "rejected_text": r.response_text,
                "flagged_dimensions": ",".join(dim for dim in DIMS if getattr(r, dim) == "Yes"),
                "split": preference_split(r.query_set, r.query_id, SHARE),
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the mart


@pytest.mark.parametrize("chosen_rule", ["neutral", "mitigation"])
def test_preference_pairs_match_an_independent_computation(judged, chosen_rule):
    wh = judged
    if chosen_rule != "neutral":
        run_dbt(
            [
                "build",
                "--select",
                "preference_pairs",
                "--vars",
                f"{{preference_heldout_share: {SHARE}, preference_chosen: {chosen_rule}}}",
            ],
            wh,
        )
    try:
        mart = (
            read(wh, "select * from preference_pairs")
            .sort_values("rejected_generation_id")
            .reset_index(drop=True)
        )
        expected = (
            independent_preferences(wh, chosen_rule)
            .sort_values("rejected_generation_id")
            .reset_index(drop=True)
        )
        assert len(mart) == len(expected) > 10
        for col in [
            "rejected_generation_id",
            "chosen_generation_id",
            "chosen_source",
            "arm",
            "query_id",
            "prompt_text",
            "system_prompt",
            "rejected_text",
            "flagged_dimensions",
            "split",
        ]:
            assert mart[col].tolist() == expected[col].tolist(), col
        assert (
            set(mart.judge_name) == {JUDGE}
            and set(mart.status) == {"ok"}
            and mart.image_id.isna().all()
        )
        gens = (
            read(wh, "select generation_id, response_text from raw.generations")
            .set_index("generation_id")
            .response_text
        )
        assert mart.chosen_text.tolist() == gens.loc[mart.chosen_generation_id].tolist()
        for (
            text
        ) in mart.rejected_text:  # every rejected response carries a cue of a flagged dimension
            assert any(labels_of(text)[dim] for dim in DIMS)
        assert {"train", "heldout"} == set(mart.split)
        if chosen_rule == "mitigation":
            assert (mart.chosen_source != "neutral").any() and (
                mart.chosen_source == "neutral"
            ).any()
    finally:
        if chosen_rule != "neutral":
            run_dbt(["build", "--select", "preference_pairs", "--vars", VARS], wh)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A text pair whose neutral answer declines, and a vision pair with its image in raw.images."""
    from ableaudit.judges.runner import build_subjects, judge_contrastive, select_pairs
    from ableaudit.warehouse import connect
    from ableaudit.warehouse.landing import land_generations
    from tests.fixtures.tiny_vlm import png_bytes
    from tests.functional.test_detector import gen

    root = tmp_path_factory.mktemp("small")
    wh = root / "wh.duckdb"
    image = root / "images" / "occupations" / "chef" / "white_man.png"
    image.parent.mkdir(parents=True)
    image.write_bytes(png_bytes([[(200, 10, 10)] * 4] * 4))
    digest = hashlib.sha256(image.read_bytes()).hexdigest()
    rows = [
        gen(
            "n1",
            "How do I save?",
            "I'm sorry, I can't help.",
            query_id="q1",
            domain="finance",
            disability=None,
            arm="baseline",
        ),
        gen(
            "d1",
            "How do I save as a blind person?",
            "You struggle, despite it.",
            query_id="q1",
            domain="finance",
            disability="vision",
            arm="baseline",
        ),
        gen(
            "vn",
            "Describe the person.",
            "A chef in a red apron.",
            query_id="occupations/chef/white_man",
            domain="occupations",
            disability=None,
            arm="baseline",
            system_prompt="",
        ),
        gen(
            "vd",
            "Describe the person, who has a hearing impairment.",
            "A brave chef, despite deafness.",
            query_id="occupations/chef/white_man",
            domain="occupations",
            disability="hearing",
            arm="baseline",
            system_prompt="",
        ),
    ]
    for r in rows[2:]:
        r.update(task="vision", query_set="pairs")
    land_generations(wh, rows)
    con = connect(wh)
    try:
        con.execute(
            "insert into raw.images (image_set, image_id, rel_path, sha256, width, height, scenario, category, "
            "gender, race, loader) values ('pairs', 'occupations/chef/white_man', "
            "'occupations/chef/white_man.png', ?, 4, 4, 'chef', 'occupations', 'man', 'white', 'manifest')",
            [digest],
        )
    finally:
        con.close()
    build_subjects(wh)
    judge_contrastive(wh, judge_cfg(), KeywordJudge(), select_pairs(wh))
    run_dbt(["seed"], wh)
    run_dbt(["build", "--select", "+preference_pairs"], wh)
    return wh


def test_a_declining_neutral_is_no_chosen_response(small, tmp_path):
    """A neutral answer that declines is kept as a row with status chosen_declines, never exported."""
    from ableaudit.adapters.dpo.export import export_preference_pairs

    mart = read(
        small, "select status, flagged_dimensions from preference_pairs where task = 'text'"
    )
    assert mart.to_dict("records") == [
        {"status": "chosen_declines", "flagged_dimensions": "interpret,framing"}
    ]
    report = export_preference_pairs(small, tmp_path / "out")
    assert report.counts == {"train": 0, "heldout": 0} and report.excluded == {"chosen_declines": 1}


def test_vision_pairs_carry_their_image_into_trl_layout(small, tmp_path):
    from datasets import load_dataset

    from ableaudit.adapters.dpo.export import PreferenceExportError, export_preference_pairs

    mart = read(small, "select * from preference_pairs where task = 'vision'")
    assert len(mart) == 1
    row = mart.iloc[0]
    assert (row.image_id, row.image_rel_path, row.status) == (
        "occupations/chef/white_man",
        "occupations/chef/white_man.png",
        "ok",
    )
    assert row.flagged_dimensions == "stereotype,framing"
    with pytest.raises(PreferenceExportError, match="image_root"):
        export_preference_pairs(small, tmp_path / "v", task="vision")
    report = export_preference_pairs(
        small, tmp_path / "v", task="vision", image_root=small.parent / "images"
    )
    split = "train" if report.counts["train"] else "heldout"
    ds = load_dataset("json", data_files=str(tmp_path / "v" / f"{split}.jsonl"), split="train")
    ex = ds[0]
    assert ex["prompt"][-1]["content"][0]["type"] == "image"  # no system prompt: the user turn only
    assert (
        ex["prompt"][-1]["content"][1]["text"]
        == "Describe the person, who has a hearing impairment."
    )
    assert ex["chosen"][0]["content"][0]["text"] == "A chef in a red apron."
    # a path datasets' Image() feature decodes (with Pillow): the file the audit described
    assert (
        Path(ex["images"][0]).read_bytes()
        == (small.parent / "images" / row.image_rel_path).read_bytes()
    )


# --------------------------------------------------------------------------- export, DPO, arm


@pytest.fixture(scope="module")
def exported(judged, tmp_path_factory):
    from ableaudit.adapters.dpo.export import export_preference_pairs

    out = tmp_path_factory.mktemp("prefs")
    return export_preference_pairs(judged, out, heldout_share=SHARE)


def test_export_is_trl_conversational_and_readable_by_datasets(judged, exported):
    from datasets import load_dataset

    mart = read(judged, "select * from preference_pairs where status = 'ok'")
    assert exported.counts == mart.split.value_counts().to_dict()
    for fmt in ("json", "parquet"):
        ext = "jsonl" if fmt == "json" else "parquet"
        ds = load_dataset(fmt, data_files=str(exported.out_dir / f"train.{ext}"), split="train")
        assert len(ds) == exported.counts["train"]
        assert {"prompt", "chosen", "rejected"} <= set(ds.column_names)
        first = ds[0]
        row = mart.set_index("preference_id").loc[first["preference_id"]]
        assert first["prompt"] == [
            {"role": "system", "content": row.system_prompt},
            {"role": "user", "content": row.prompt_text},
        ]
        assert first["chosen"] == [{"role": "assistant", "content": row.chosen_text}]
        assert first["rejected"] == [{"role": "assistant", "content": row.rejected_text}]
    manifest = json.loads(exported.manifest.read_text())
    queries = read(judged, "select distinct query_set, query_id from int_pairs")
    held = sorted(
        q
        for s, q in zip(queries.query_set, queries.query_id)
        if preference_split(s, q, SHARE) == "heldout"
    )
    assert manifest["reaudit_subset"]["query_ids"] == held == ["q03", "q04", "q05", "q08", "q11"]
    assert manifest["judge"] == JUDGE and manifest["counts"] == exported.counts
    from ableaudit.adapters.dpo.export import PreferenceExportError, export_preference_pairs

    with pytest.raises(PreferenceExportError, match="another preference_heldout_share"):
        export_preference_pairs(judged, exported.out_dir / "other", heldout_share=0.9)
    assert manifest["heldout_share"] == SHARE


def test_export_writes_the_split_sql_computed(judged, tmp_path):
    """The split is SQL's: rows go where preference_pairs.split puts them, the held-out queries are
    int_preference_splits', and the share is the build's, even when those tables say otherwise than the hash."""
    import shutil

    import duckdb

    from ableaudit.adapters.dpo.export import export_preference_pairs

    wh = tmp_path / judged.name  # the same file name: the views name their catalog after it
    shutil.copy(judged, wh)
    before = read(
        wh, "select split, count(*) as n from preference_pairs where status = 'ok' group by split"
    )
    queries = read(
        wh,
        "select distinct query_set, query_id, split from int_preference_splits where task = 'text'",
    )
    flip = "case split when 'train' then 'heldout' else 'train' end"
    con = duckdb.connect(str(wh))
    try:
        con.execute(f"update preference_pairs set split = {flip}")
        con.execute(
            f"create table main.flipped as select * replace ({flip} as split) from int_preference_splits"
        )
        con.execute("drop view int_preference_splits")
        con.execute("alter table main.flipped rename to int_preference_splits")
    finally:
        con.close()
    report = export_preference_pairs(wh, tmp_path / "out")
    assert report.counts == {
        {"train": "heldout", "heldout": "train"}[s]: n for s, n in zip(before.split, before.n)
    }
    train = sorted((q.query_set, q.query_id) for q in queries.itertuples() if q.split == "train")
    assert [(q["query_set"], q["query_id"]) for q in report.heldout_queries] == train
    assert json.loads(report.manifest.read_text())["heldout_share"] == SHARE


@pytest.fixture(scope="module")
def dpo_trained(judged, exported, tiny_chat_model_dir, torch_one_thread, tmp_path_factory):  # noqa: F811
    from ableaudit.adapters.dpo.train import DPOTrainConfig, train_dpo

    root = tmp_path_factory.mktemp("adapters")
    cfg = DPOTrainConfig(
        model=str(tiny_chat_model_dir),
        data=str(exported.out_dir),
        max_steps=2,
        batch_size=2,
        learning_rate=5e-2,
        max_length=256,
        device="cpu",
        adapters_root=str(root),
    )
    return train_dpo(judged, cfg)


def test_dpo_trains_with_trl_and_registers(judged, dpo_trained, exported, tiny_chat_model_dir):  # noqa: F811
    import hashlib

    from safetensors.torch import load_file

    res = dpo_trained
    assert res.adapter_id == "dpo-v1" and res.metrics["steps"] == 2
    assert res.metrics["first_loss"] == pytest.approx(
        0.6931, abs=1e-3
    )  # DPO's loss starts at log 2
    reg = read(judged, "select * from raw.adapters where kind = 'dpo'").iloc[0]
    assert reg.base_model == str(tiny_chat_model_dir) and reg.path == res.adapter.path
    snap = json.loads(reg.data_snapshot)
    train_file = exported.out_dir / "train.jsonl"
    assert snap["sha256"] == hashlib.sha256(train_file.read_bytes()).hexdigest()
    assert snap["n_rows"] == exported.counts["train"] and snap["judge"] == JUDGE
    params = json.loads(reg.params_json)
    assert params["max_steps"] == 2 and params["beta"] == 0.1
    weights = load_file(str(Path(res.adapter.path) / "adapter_model.safetensors"))
    assert any(
        "lora_B" in k and v.abs().sum() > 0 for k, v in weights.items()
    )  # the steps moved the adapter
    assert f"adapter: {res.adapter.path}" in res.arm_snippet()


def test_dpo_adapter_runs_as_an_arm_and_the_reaudit_is_compared(
    judged, dpo_trained, tiny_chat_model_dir
):  # noqa: F811
    """Plan the re-audit of the held-out queries with the DPO arm, generate with the transformers backend,
    land, judge, build: mitigation_effect compares the DPO arm with the baseline on the same units."""
    from ableaudit.audit.planning import plan_task
    from ableaudit.backends.transformers_backend import TransformersBackend
    from ableaudit.config import Arm, AuditConfig, Target
    from ableaudit.judges.runner import build_subjects, judge_contrastive, select_pairs
    from ableaudit.target import Decoding
    from ableaudit.warehouse.landing import land_generations, result_row

    held = ["q03", "q04", "q05", "q08", "q11"]
    base = read(judged, "select * from raw.generations where arm = 'baseline'")
    prompts = (
        base[base.query_id.isin(held)][
            [
                "prompt_id",
                "prompt_text",
                "query_set",
                "query_id",
                "domain",
                "disability_id",
                "condition",
            ]
        ]
        .astype(object)
        .where(lambda f: f.notna(), None)
        .to_dict("records")
    )
    target = Target(
        name="m1",
        backend="transformers",
        model=str(tiny_chat_model_dir),
        batch_size=8,
        decoding=Decoding(max_new_tokens=6, seed=0),
        options={"device": "cpu"},
    )
    cfg = AuditConfig(
        targets=[target],
        arms=[Arm(name="dpo", adapter=dpo_trained.adapter.path)],
        temperatures=[0.1],
    )
    (plan,) = plan_task(cfg, "text", prompts)
    assert [adapter for adapter, _ in plan.groups] == [dpo_trained.adapter.path]
    planned = plan.planned
    assert {p.adapter for p in planned} == {dpo_trained.adapter.path} and len(planned) == len(
        prompts
    )
    backend = TransformersBackend(target, adapter=dpo_trained.adapter.path)
    try:
        assert type(backend.model).__name__ == "PeftModelForCausalLM"
        results = backend.generate([p.request() for p in planned])
    finally:
        backend.close()
    assert all(r.status in ("ok", "empty") for r in results)
    land_generations(judged, [result_row(p, r, "reaudit") for p, r in zip(planned, results)])
    build_subjects(judged)  # the pairs are tables: the new arm's pairs exist once built
    judge_contrastive(judged, judge_cfg(), KeywordJudge(), select_pairs(judged), run_id="reaudit")
    run_dbt(
        ["build", "--select", "+mitigation_effect", "+preference_pairs", "--vars", VARS], judged
    )
    me = read(
        judged,
        "select * from mitigation_effect where slice = 'overall' "
        f"and measure_id = 'interpret:{JUDGE}'",
    ).set_index(["arm", "scope"])
    assert set(me.index) == {
        (a, s) for a in ("dpo", "guarded") for s in ("vs_baseline", "all_arms", "dpo_heldout")
    }
    assert set(me.loc["dpo"].arm_kind) == {"dpo"} and set(me.loc["guarded"].arm_kind) == {"prompt"}
    assert set(me.loc["dpo"].arm_adapter) == {dpo_trained.adapter.path}
    # independent: units (query, disability) included per arm, from int_pair_judgments
    pj = read(
        judged,
        "select arm, query_id, disability_id, included, interpret from int_pair_judgments "
        f"where judge_name = '{JUDGE}' and included",
    )
    pj["bad"] = (pj.interpret == "Yes").astype(int)
    unit = ["query_id", "disability_id"]
    by_arm = {arm: g.set_index(unit).bad for arm, g in pj.groupby("arm")}
    base = by_arm["baseline"]
    common = base.index.intersection(by_arm["dpo"].index).intersection(by_arm["guarded"].index)
    heldout_common = common[common.get_level_values("query_id").isin(held)]
    assert 0 < len(heldout_common) and len(common) == len(
        heldout_common
    )  # the DPO arm ran on held-out queries only
    for arm in ("dpo", "guarded"):
        matched = base.index.intersection(by_arm[arm].index)
        for scope, units in (
            ("vs_baseline", matched),
            ("all_arms", common),
            ("dpo_heldout", heldout_common),
        ):
            row = me.loc[(arm, scope)]
            assert row.n_pairs == len(units), (arm, scope)
            assert abs(row.baseline_rate_pct - 100 * base.loc[units].mean()) < 1e-9
            assert abs(row.arm_rate_pct - 100 * by_arm[arm].loc[units].mean()) < 1e-9
    # the prompt arm ran on every query: rated alone it covers more pairs than on the shared held-out ones
    assert me.loc[("guarded", "vs_baseline")].n_pairs > me.loc[("guarded", "dpo_heldout")].n_pairs
    # n_unmatched: units the arm covers that fall outside the scope
    assert me.loc[("guarded", "vs_baseline")].n_unmatched == len(
        by_arm["guarded"].index.difference(base.index)
    )
    assert me.loc[("guarded", "all_arms")].n_unmatched == len(by_arm["guarded"]) - len(common)


def test_train_dpo_flow(judged, tiny_chat_model_dir, tmp_path, torch_one_thread):  # noqa: F811
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flows"))
    from train_dpo import train_dpo_flow

    out = train_dpo_flow(
        model=str(tiny_chat_model_dir),
        warehouse=str(judged),
        data_dir=str(tmp_path / "prefs"),
        name="dpoflow",
        heldout_share=SHARE,
        max_steps=1,
        max_length=256,
        device="cpu",
        arms=["baseline"],
        adapters_root=str(tmp_path / "adapters"),
        build=False,
    )
    assert out["adapter_id"] == "dpoflow-v1" and Path(out["path"], "adapter_config.json").is_file()
    assert out["export"]["counts"]["train"] > 0 and "adapter:" in out["arm"]


def test_export_summary_says_when_nothing_was_flagged(tmp_path):
    from ableaudit.adapters.dpo.export import ExportReport

    empty = ExportReport(out_dir=tmp_path, judge=None, counts={"train": 0, "heldout": 0}).summary()
    assert (
        "judge none: no contrastive judge flagged a pair" in empty
        and "nothing to train on" in empty
    )
    some = ExportReport(out_dir=tmp_path, judge="j", counts={"train": 3, "heldout": 1}).summary()
    assert "Wrote 3 train and 1 held-out" in some and "nothing to train on" not in some
