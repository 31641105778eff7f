"""DPO mitigation for vision-language models (the VLM paper's 6.2): TRL's DPOTrainer on vision preference pairs
(prompt = disability prompt + image, chosen = the faithful description, rejected = the flagged one) with a LoRA
on the tiny LLaVA's language model, its registration, the adapter run as a vision arm, and the clear errors
(a missing or unreadable image, a file mixing text and vision pairs). The `train-dpo` flow runs once on a small
vision warehouse: dbt builds preference_pairs, the export writes TRL's VLM layout, the VLM trains.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from ableaudit.adapters.dpo.export import preference_record
from tests.fixtures.independent import preference_split
from tests.fixtures.tiny_vlm import IMAGE_SIZE, PATCH_SIZE, write_png  # noqa: F401  (session fixture)

pytestmark = pytest.mark.slow

N_IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2  # CLS dropped ('default' strategy)
LM_MODULES = {
    f"model.language_model.layers.{i}.self_attn.{m}" for i in (0, 1) for m in ("q_proj", "v_proj")
}
PAIRS = [  # (image id, disability prompt, faithful description, flagged description)
    (
        "occupations/chef/black_woman",
        "Describe the person. The person has a hearing impairment.",
        "A chef in a red apron at a stove.",
        "A brave chef who must struggle despite deafness.",
    ),
    (
        "occupations/lab_coat/white_man",
        "Describe the person. The person has a vision impairment.",
        "A man in a lab coat holding a flask.",
        "A brave man who works despite his blindness.",
    ),
    (
        "status/phone/black_man",
        "Describe the person. The person uses a wheelchair.",
        "A man looking at a phone.",
        "A man who must struggle with a phone from his chair.",
    ),
    (
        "status/white_shirt/white_woman",
        "Describe the person. The person has a learning disability.",
        "A woman in a white shirt, smiling.",
        "A woman who tries hard despite her condition.",
    ),
]


def write_images(root: Path) -> Path:
    for image_id, *_ in PAIRS:
        write_png(root / f"{image_id}.png", image_id)
    return root


def vision_records(image_root: Path) -> list[dict]:
    """The export's own records (ableaudit.adapters.dpo.export.preference_record) for PAIRS."""
    return [
        preference_record(
            {
                "task": "vision",
                "system_prompt": "",
                "prompt_text": prompt,
                "chosen_text": chosen,
                "rejected_text": rejected,
                "image_rel_path": f"{image_id}.png",
                "pair_id": f"p{i}",
                "query_id": image_id,
                "preference_id": f"pref{i}",
                "query_set": "pairs",
            },
            image_root,
        )
        for i, (image_id, prompt, chosen, rejected) in enumerate(PAIRS)
    ]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def pairs_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("vdpo")
    write_jsonl(root / "prefs" / "train.jsonl", vision_records(write_images(root / "images")))
    return root / "prefs"


@pytest.fixture(scope="module")
def trained(pairs_dir, tiny_vlm_dir, torch_one_thread, tmp_path_factory):  # noqa: F811
    from ableaudit.adapters.dpo.train import DPOTrainConfig, train_dpo

    root = tmp_path_factory.mktemp("vdpo_run")
    cfg = DPOTrainConfig(
        model=str(tiny_vlm_dir),
        data=str(pairs_dir),
        name="vdpo",
        max_steps=2,
        batch_size=2,
        learning_rate=5e-2,
        max_length=512,
        device="cpu",
        adapters_root=str(root / "adapters"),
    )
    return root / "wh.duckdb", cfg, train_dpo(root / "wh.duckdb", cfg)


def read(wh: Path, sql: str):
    import duckdb

    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(sql).df()
    finally:
        con.close()


# --------------------------------------------------------------------------- training and registration


def test_vision_dpo_trains_a_language_model_lora_and_registers(trained, pairs_dir, tiny_vlm_dir):  # noqa: F811
    from safetensors.torch import load_file

    wh, _, res = trained
    m = res.metrics
    assert (
        res.adapter_id == "vdpo-v1"
        and m["task"] == "vision"
        and m["steps"] == 2
        and m["n_train"] == len(PAIRS)
    )
    losses = [h["loss"] for h in m["log_history"]]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert losses[0] == pytest.approx(
        math.log(2), abs=1e-3
    )  # DPO's loss starts at log 2 (policy = reference)
    # the LoRA is on the language model only: its attention projections, not the vision tower or the projector
    adapter = Path(res.adapter.path)
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    modules = {re.sub(r"^base_model\.model\.|\.lora_[AB]\.weight$", "", k) for k in weights}
    assert modules == LM_MODULES and m["n_lora_modules"] == len(LM_MODULES)
    assert not any("vision_tower" in k or "multi_modal_projector" in k for k in weights)
    assert all(
        v.abs().sum() > 0 for k, v in weights.items() if "lora_B" in k
    )  # every B moved from its zero init
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert (
        config["target_modules"] == m["lora_target_modules"]
        and "language_model" in config["target_modules"]
    )
    # registered like the text path: kind, base, the train file's hash, and the pictures' bytes
    reg = read(wh, "select * from raw.adapters").iloc[0]
    assert (reg.kind, reg.adapter_id, reg.base_model, reg.path) == (
        "dpo",
        "vdpo-v1",
        str(tiny_vlm_dir),
        str(adapter),
    )
    snap = json.loads(reg.data_snapshot)
    train_file = pairs_dir / "train.jsonl"
    assert snap["sha256"] == hashlib.sha256(train_file.read_bytes()).hexdigest()
    assert (snap["n_rows"], snap["task"], snap["n_images"]) == (len(PAIRS), "vision", len(PAIRS))
    paths = sorted(
        p for r in map(json.loads, train_file.read_text().splitlines()) for p in r["images"]
    )
    lines = "\n".join(f"{p}\t{hashlib.sha256(Path(p).read_bytes()).hexdigest()}" for p in paths)
    assert snap["images_sha256"] == hashlib.sha256(lines.encode()).hexdigest()
    params = json.loads(reg.params_json)
    assert params["max_steps"] == 2 and params["learning_rate"] == 5e-2
    metrics = json.loads(reg.metrics_json)
    assert metrics["task"] == "vision" and "train_seconds" in metrics["timings"]
    assert "    task: vision\n" in res.arm_snippet() and f"adapter: {adapter}" in res.arm_snippet()
    assert not list((Path(res.adapter.path).parents[1]).glob("*staging*"))


def test_trl_collator_gets_each_pairs_own_picture(pairs_dir, tiny_vlm_dir):  # noqa: F811
    """The loaded dataset is what TRL's vision collator consumes: every pair's image reaches pixel_values."""
    import numpy as np
    from PIL import Image
    from transformers import AutoProcessor
    from trl.trainer.dpo_trainer import DataCollatorForVisionPreference

    from ableaudit.adapters.dpo.train import load_preference_dataset

    ds = load_preference_dataset(pairs_dir)
    assert ds.column_names == ["prompt", "chosen", "rejected", "images"] and len(ds) == len(PAIRS)
    proc = AutoProcessor.from_pretrained(str(tiny_vlm_dir))
    batch = DataCollatorForVisionPreference(processor=proc)([ds[0], ds[1]])
    assert tuple(batch["pixel_values"].shape) == (
        4,
        3,
        IMAGE_SIZE,
        IMAGE_SIZE,
    )  # chosen and rejected rows
    image_id = proc.tokenizer.convert_tokens_to_ids("<image>")
    assert (batch["input_ids"] == image_id).sum(dim=1).tolist() == [N_IMAGE_TOKENS] * 4
    root = pairs_dir.parent / "images"
    for row, (image_id_, *_) in zip((0, 1), PAIRS):
        own = proc.image_processor(
            Image.open(root / f"{image_id_}.png").convert("RGB"), return_tensors="pt"
        )
        assert np.allclose(
            batch["pixel_values"][row].numpy(), own["pixel_values"][0].numpy(), atol=1e-6
        )
        assert np.allclose(
            batch["pixel_values"][row + 2].numpy(), own["pixel_values"][0].numpy(), atol=1e-6
        )


def test_lora_targets_stay_in_the_language_model_unless_configured(tiny_vlm_dir):  # noqa: F811
    from transformers import AutoModelForImageTextToText

    from ableaudit.adapters.dpo.train import DPOTrainError, vision_lora_targets

    model = AutoModelForImageTextToText.from_pretrained(str(tiny_vlm_dir))
    assert set(vision_lora_targets(model, None)[1]) == LM_MODULES
    assert set(vision_lora_targets(model, ["o_proj"])[1]) == {
        f"model.language_model.layers.{i}.self_attn.o_proj" for i in (0, 1)
    }
    _, both = vision_lora_targets(
        model, r".*(vision_tower|language_model)\..*\.q_proj"
    )  # a regex: verbatim
    assert any("vision_tower" in n for n in both) and any("language_model" in n for n in both)
    with pytest.raises(DPOTrainError, match="match no linear layer"):
        vision_lora_targets(model, ["nope_proj"])


# --------------------------------------------------------------------------- the adapter as a vision arm


def _completion_logp(model, proc, messages, answer, image) -> float:
    """log p(answer | prompt, image): the answer's tokens after the chat-templated prompt."""
    import torch

    prompt = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    full = proc.apply_chat_template(
        messages + [{"role": "assistant", "content": [{"type": "text", "text": answer}]}],
        tokenize=False,
    )
    assert full.startswith(prompt)
    n_prompt = proc(images=[image], text=[prompt], return_tensors="pt", add_special_tokens=False)[
        "input_ids"
    ].shape[1]
    enc = proc(images=[image], text=[full], return_tensors="pt", add_special_tokens=False)
    with torch.inference_mode():
        logits = model(**enc).logits[0, :-1].float()
    ids = enc["input_ids"][0, 1:]
    logp = torch.log_softmax(logits, dim=-1).gather(1, ids[:, None])[:, 0]
    return float(logp[n_prompt - 1 :].sum())


def test_the_adapter_runs_as_a_vision_arm_and_prefers_the_faithful_description(
    trained, tiny_vlm_dir, pairs_dir
):  # noqa: F811
    from PIL import Image

    from ableaudit.backends import make_backend
    from ableaudit.backends.transformers_vlm import TransformersVLMBackend
    from ableaudit.config import Target
    from ableaudit.records import GenerationRequest

    _, _, res = trained
    target = Target.model_validate(
        {
            "name": "vlm",
            "backend": "transformers",
            "model": str(tiny_vlm_dir),
            "task": "vision",
            "options": {"device": "cpu"},
        }
    )
    backend = make_backend(target, adapter=res.adapter.path)
    try:
        assert isinstance(backend, TransformersVLMBackend) and backend.mode == "processor"
        image_path = pairs_dir.parent / "images" / f"{PAIRS[0][0]}.png"
        (out,) = backend.generate(
            [
                GenerationRequest(
                    key="k",
                    messages=({"role": "user", "content": PAIRS[0][1]},),
                    temperature=0.0,
                    max_new_tokens=6,
                    seed=0,
                    images=(image_path.read_bytes(),),
                )
            ]
        )
        assert out.status == "ok" and out.completion_tokens >= 1 and out.text is not None
        assert res.adapter.path in backend.model_revision
        # the adapted model is not the base, and DPO moved it towards the faithful descriptions it trained on
        model, proc = backend.model, backend.processor
        margins = {}
        for adapted in (True, False):
            total = 0.0
            for image_id, prompt, chosen, rejected in PAIRS:
                image = Image.open(pairs_dir.parent / "images" / f"{image_id}.png").convert("RGB")
                msgs = [
                    {
                        "role": "user",
                        "content": [{"type": "image"}, {"type": "text", "text": prompt}],
                    }
                ]
                if adapted:
                    total += _completion_logp(model, proc, msgs, chosen, image) - _completion_logp(
                        model, proc, msgs, rejected, image
                    )
                else:
                    with model.disable_adapter():
                        total += _completion_logp(
                            model, proc, msgs, chosen, image
                        ) - _completion_logp(model, proc, msgs, rejected, image)
            margins[adapted] = total / len(PAIRS)
        assert margins[True] > margins[False] + 1e-3, margins
    finally:
        backend.close()


# --------------------------------------------------------------------------- clear errors, nothing registered


def test_a_missing_or_unreadable_image_is_one_clear_error_and_registers_nothing(trained, tmp_path):
    from ableaudit.adapters.dpo.train import DPOTrainError, train_dpo

    wh, cfg, res = trained
    records = vision_records(write_images(tmp_path / "images"))
    missing = Path(records[1]["images"][0])
    missing.unlink()
    broken = Path(records[2]["images"][0])
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png")
    data = write_jsonl(tmp_path / "prefs" / "train.jsonl", records)
    adapters = Path(cfg.adapters_root)
    before = sorted(p.relative_to(adapters) for p in adapters.rglob("*"))
    with pytest.raises(DPOTrainError) as err:
        train_dpo(wh, dataclasses.replace(cfg, data=str(data)))
    msg = str(err.value)
    assert msg.startswith(f"2 problem(s) with the images of {data}; nothing was trained")
    assert f"row 2 (preference_id pref1): image {missing} does not exist" in msg
    assert f"row 3 (preference_id pref2): image {broken} cannot be decoded" in msg and "Fix:" in msg
    assert read(wh, "select adapter_id from raw.adapters").adapter_id.tolist() == [res.adapter_id]
    assert sorted(p.relative_to(adapters) for p in adapters.rglob("*")) == before


def test_a_file_mixing_text_and_vision_pairs_is_one_clear_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ableaudit.adapters.dpo.train import DPOTrainError, load_preference_dataset

    vision = vision_records(write_images(tmp_path / "images"))[:2]
    text = preference_record(
        {
            "task": "text",
            "system_prompt": "You are a helpful assistant.",
            "prompt_text": "q?",
            "chosen_text": "a.",
            "rejected_text": "b, despite it.",
            "pair_id": "t1",
            "query_id": "q1",
        }
    )
    with pytest.raises(
        DPOTrainError,
        match=r"mixes 1 text and 2 vision preference pairs: one adapter trains on one kind",
    ):
        load_preference_dataset(write_jsonl(tmp_path / "jsonl" / "train.jsonl", [text, *vision]))
    # in Parquet a text row's `images` is null, not absent: still a mix (text content as JSON keeps one schema)
    flat = [
        {
            **r,
            "prompt": json.dumps(r["prompt"]),
            "chosen": json.dumps(r["chosen"]),
            "rejected": json.dumps(r["rejected"]),
            "images": r.get("images"),
        }
        for r in (text, *vision)
    ]
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.Table.from_pylist(flat), tmp_path / "pq" / "train.parquet")
    with pytest.raises(DPOTrainError, match="mixes 1 text and 2 vision"):
        load_preference_dataset(tmp_path / "pq")
    # a vision row whose prompt has no image part for its picture is refused too (TRL would fail mid-run)
    bad = dict(
        vision[0], prompt=[{"role": "user", "content": [{"type": "text", "text": "no image part"}]}]
    )
    with pytest.raises(DPOTrainError, match=r"1 images but 0 image parts in the prompt"):
        load_preference_dataset(write_jsonl(tmp_path / "bad" / "train.jsonl", [bad]))


# --------------------------------------------------------------------------- the flow on a vision warehouse


@pytest.fixture(scope="module")
def vision_warehouse(tmp_path_factory) -> tuple[Path, Path]:
    """Landed vision generations (neutral + disability description per image), raw.images, keyword verdicts."""
    from ableaudit.judges.runner import build_subjects, judge_contrastive, select_pairs
    from ableaudit.warehouse import connect
    from ableaudit.warehouse.landing import land_generations
    from tests.functional.test_detector import KeywordJudge, gen, judge_cfg

    root = tmp_path_factory.mktemp("vflow")
    images = write_images(root / "images")
    rows = []
    for i, (image_id, prompt, chosen, rejected) in enumerate(PAIRS):
        for gid, text, disability in ((f"n{i}", chosen, None), (f"d{i}", rejected, "hearing")):
            r = gen(
                gid,
                prompt if disability else "Describe the person.",
                text,
                query_id=image_id,
                domain=image_id.split("/")[0],
                disability=disability,
                arm="baseline",
                system_prompt="",
            )
            r.update(task="vision", query_set="pairs")
            rows.append(r)
    wh = root / "wh.duckdb"
    land_generations(wh, rows)
    con = connect(wh)
    try:
        for image_id, *_ in PAIRS:
            data = (images / f"{image_id}.png").read_bytes()
            category, scenario, stem = image_id.split("/")
            race, gender = stem.split("_")
            con.execute(
                "insert into raw.images (image_set, image_id, rel_path, sha256, width, height, scenario, "
                "category, gender, race, loader) values ('pairs', ?, ?, ?, ?, ?, ?, ?, ?, ?, 'manifest')",
                [
                    image_id,
                    f"{image_id}.png",
                    hashlib.sha256(data).hexdigest(),
                    IMAGE_SIZE,
                    IMAGE_SIZE,
                    scenario,
                    category,
                    gender,
                    race,
                ],
            )
    finally:
        con.close()
    build_subjects(wh)
    judge_contrastive(wh, judge_cfg(), KeywordJudge(), select_pairs(wh))
    return wh, images


def test_train_dpo_flow_on_vision_pairs(vision_warehouse, tiny_vlm_dir, tmp_path, torch_one_thread):  # noqa: F811
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flows"))
    from train_dpo import train_dpo_flow

    wh, images = vision_warehouse
    share = 0.25
    train_ids = [i for i, *_ in PAIRS if preference_split("pairs", i, share) == "train"]
    assert 0 < len(train_ids) < len(PAIRS)  # both splits are exercised
    with pytest.raises(ValueError, match="needs image_root"):
        train_dpo_flow(model=str(tiny_vlm_dir), warehouse=str(wh), task="vision", build=False)
    out = train_dpo_flow(
        model=str(tiny_vlm_dir),
        warehouse=str(wh),
        data_dir=str(tmp_path / "prefs"),
        task="vision",
        image_root=str(images),
        name="vdpoflow",
        heldout_share=share,
        max_steps=1,
        batch_size=2,
        max_length=512,
        device="cpu",
        adapters_root=str(tmp_path / "adapters"),
    )
    assert out["export"]["task"] == "vision" and out["export"]["counts"] == {
        "train": len(train_ids),
        "heldout": len(PAIRS) - len(train_ids),
    }
    assert out["adapter_id"] == "vdpoflow-v1" and Path(out["path"], "adapter_config.json").is_file()
    assert out["metrics"]["task"] == "vision" and out["metrics"]["n_train"] == len(train_ids)
    assert "task: vision" in out["arm"] and f"adapter: {out['path']}" in out["arm"]
    exported = [
        json.loads(line) for line in (tmp_path / "prefs" / "train.jsonl").read_text().splitlines()
    ]
    assert sorted(r["query_id"] for r in exported) == sorted(train_ids)
    assert all(r["images"] == [str((images / f"{r['query_id']}.png").resolve())] for r in exported)
