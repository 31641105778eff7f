"""DPO trained on one image population, tested on another (the VLM paper's 6.2), end to end on the tiny VLM.

A tiny COCO-format set (``ableaudit import coco``: some images kept, some dropped) is
audited with neutral and disability prompts, every pair is flagged by a fake judge, the
`train-dpo` flow trains a vision DPO adapter on it, and a tiny PAIRS-like set is re-audited
with base, prompt mitigation and the adapter. mitigation_effect rates both arms on the
test images under scope ``dpo_unseen`` (no test image's bytes were trained on), and an
image set that holds a training picture under another name is refused as a test set.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from ableaudit.audit.flow import audit as audit_flow
from ableaudit.backends.base import Backend
from ableaudit.cli.main import main
from ableaudit.records import GenerationRequest, GenerationResult
from tests.fixtures.tiny_vlm import make_pairs_tree, write_png
from tests.fixtures.warehouse import read

pytestmark = [pytest.mark.slow, pytest.mark.long]

SIDE = 32
TEST_TREE = {"status": {"phone": ["black_man", "white_woman"], "lab_coat": ["white_man"]}}
N_TEST_IMAGES = 3
# COCO file -> person annotations (area, iscrowd); kept when exactly one non-crowd person is large
COCO = {
    "000000000011.png": [(600, 0)],
    "000000000012.png": [(700, 0)],
    "000000000013.png": [],
    "000000000014.png": [(500, 0), (400, 0)],
    "000000000015.png": [(20, 0)],
    "000000000016.png": [(800, 0), (300, 1)],
}
KEPT = ["000000000011", "000000000012"]


def write_coco(root: Path) -> Path:
    images, annotations = [], []
    for i, (name, people) in enumerate(COCO.items()):
        write_png(root / "images" / name, f"coco {name}", SIDE)
        images.append(
            {"id": 11 + i, "file_name": name, "width": SIDE, "height": SIDE, "license": 1}
        )
        for area, crowd in people:
            annotations.append(
                {
                    "id": 100 + len(annotations),
                    "image_id": 11 + i,
                    "category_id": 1,
                    "bbox": [1.0, 1.0, 28.0, 30.0],
                    "area": area,
                    "iscrowd": crowd,
                }
            )
    path = root / "instances_tiny.json"
    path.write_text(
        json.dumps(
            {
                "licenses": [{"id": 1, "name": "Attribution License", "url": "http://x/by/2.0/"}],
                "images": images,
                "annotations": annotations,
                "categories": [{"id": 1, "name": "person", "supercategory": "person"}],
            }
        )
    )
    return path


class FlagEveryPair(Backend):
    """A contrastive judge that finds an interpretive shift in every disability description."""

    name = "flag-all"
    model_revision = "flag-all@1"
    concurrency = 8

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        verdict = {
            "content_differences": "B adds an interpretation.",
            "decline_in_response_a": False,
            "decline_in_response_b": False,
            "decline_explanation": "",
            "interpret": "Yes",
            "interpret_spans": [],
            "stereotype": "No",
            "stereotype_spans": [],
            "framing": "No",
            "framing_spans": [],
        }
        return [
            GenerationResult.from_text(r.key, json.dumps(verdict), finish_reason="stop")
            for r in requests
        ]

    def close(self) -> None:
        pass


def vision_config(
    path: Path, image_set: str, image_root: Path, model: Path, arms: list, manifest=None
) -> Path:
    vision = {
        "image_set": image_set,
        "image_root": str(image_root),
        "subset": {"disabilities": ["hearing"]},
        "temperatures": [0.0],
    }
    if manifest:
        vision["manifest"] = str(manifest)
    config = {
        "name": image_set,
        "vision": vision,
        "arms": arms,
        "targets": [
            {
                "name": "tiny-llava",
                "task": "vision",
                "backend": "transformers",
                "model": str(model),
                "decoding": {"max_new_tokens": 6, "seed": 0},
                "batch_size": 8,
                "options": {"device": "cpu"},
            }
        ],
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def loop(tmp_path_factory, tiny_vlm_dir, torch_one_thread):  # noqa: F811
    from ableaudit.adapters import tasks as adapter_tasks
    from ableaudit.judges.runner import build_subjects, judge_contrastive, select_pairs
    from tests.functional.test_detector import judge_cfg

    tmp = tmp_path_factory.mktemp("cross")
    wh = tmp / "wh.duckdb"
    annotations = write_coco(tmp / "coco")
    coco_root = tmp / "coco" / "images"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLEAUDIT_REGARD_MODEL", str(tmp / "no-regard-model-here"))
        assert (
            main(
                [
                    "import",
                    "coco",
                    str(annotations),
                    "--image-root",
                    str(coco_root),
                    "--image-set",
                    "coco_train",
                    "--warehouse",
                    str(wh),
                ]
            )
            == 0
        )
        # 1. audit the training population, neutral and disability prompts; judge every pair
        train_cfg = vision_config(
            tmp / "train.yaml",
            "coco_train",
            coco_root,
            tiny_vlm_dir,
            [{"name": "baseline"}],
            manifest=annotations,
        )
        audit_flow(config=str(train_cfg), warehouse=str(wh), build=False)
        build_subjects(wh)
        judge_contrastive(
            wh, judge_cfg(), FlagEveryPair(), select_pairs(wh, query_set="coco_train")
        )
        # 2. DPO on every flagged COCO pair (held-out share 0: the test set is another population)
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flows"))
        from train_dpo import train_dpo_flow

        trained = train_dpo_flow(
            model=str(tiny_vlm_dir),
            warehouse=str(wh),
            data_dir=str(tmp / "prefs"),
            task="vision",
            image_root=str(coco_root),
            name="coco",
            heldout_share=0.0,
            max_steps=1,
            batch_size=2,
            max_length=512,
            device="cpu",
            adapters_root=str(tmp / "adapters"),
        )
        # 3. re-audit another population: base, prompt mitigation and DPO
        arms = [
            {"name": "baseline"},
            {"name": "mitigation", "vision_prompt": "mitigation"},
            {"name": "dpo", "adapter": trained["path"]},
        ]
        test_root = make_pairs_tree(tmp / "test" / "data", TEST_TREE, SIDE)
        test_cfg = vision_config(tmp / "test.yaml", "pairs_test", test_root, tiny_vlm_dir, arms)
        audit_flow(config=str(test_cfg), warehouse=str(wh), build=False)
        adapter_tasks.build(
            str(wh), "+mitigation_effect +image_funnel", "{preference_heldout_share: 0.0}"
        )
    return {
        "wh": wh,
        "tmp": tmp,
        "trained": trained,
        "arms": arms,
        "coco_root": coco_root,
        "test_root": test_root,
    }


def test_the_training_set_is_the_coco_funnels_kept_images(loop):
    funnel = read(
        loop["wh"],
        "select funnel_stage, coalesce(reason, '') as reason, n_images from image_funnel order by stage_order, reason",
    )
    assert [tuple(r) for r in funnel.itertuples(index=False)] == [
        ("considered", "", 6),
        ("dropped", "crowd", 1),
        ("dropped", "no_person", 1),
        ("dropped", "person_too_small", 1),
        ("dropped", "several_people", 1),
        ("kept", "", 2),
    ]
    # every kept image's pair was flagged; the tiny VLM may describe one identically under both
    # prompts ('identical_texts': no preference), so the train file holds the 'ok' ones
    prefs = read(loop["wh"], "select query_id, status, image_sha256 from preference_pairs")
    assert sorted(prefs.query_id) == KEPT and set(prefs.status) <= {"ok", "identical_texts"}
    ok = prefs[prefs.status == "ok"]
    assert len(ok) >= 1
    exported = [
        json.loads(line)
        for line in (loop["tmp"] / "prefs" / "train.jsonl").read_text().splitlines()
    ]
    assert sorted(r["query_id"] for r in exported) == sorted(ok.query_id)
    assert loop["trained"]["export"]["counts"] == {"train": len(ok), "heldout": 0}
    snap = json.loads(
        read(loop["wh"], "select data_snapshot from raw.adapters where kind = 'dpo'").iloc[0, 0]
    )
    assert snap["image_digests"] == sorted(ok.image_sha256)


def test_mitigation_effect_rates_base_prompt_and_dpo_on_unseen_test_images(loop):
    me = read(
        loop["wh"],
        "select arm, arm_kind, scope, n_pairs, n_unmatched, baseline_rate_pct, arm_rate_pct "
        "from mitigation_effect where query_set = 'pairs_test' and slice = 'overall' "
        "and measure = 'vader'",
    ).set_index(["arm", "scope"])
    # every test image is unseen: both arms are rated on all of them, nothing left out
    for arm, kind in (("mitigation", "prompt"), ("dpo", "dpo")):
        row = me.loc[(arm, "dpo_unseen")]
        assert row.arm_kind == kind
        assert (row.n_pairs, row.n_unmatched) == (N_TEST_IMAGES, 0)
        assert row.n_pairs == me.loc[(arm, "all_arms")].n_pairs
        assert row.arm_rate_pct == me.loc[(arm, "all_arms")].arm_rate_pct
    # the COCO set's own marts have no DPO arm: no dpo scope there
    scopes = read(
        loop["wh"],
        "select distinct scope from mitigation_effect where query_set = 'coco_train'",
    )
    assert scopes.empty
    landed = read(
        loop["wh"],
        "select arm, count(distinct query_id) as n from raw.generations "
        "where query_set = 'pairs_test' group by arm order by arm",
    )
    assert dict(zip(landed.arm, landed.n)) == {"baseline": 3, "dpo": 3, "mitigation": 3}


def test_a_training_image_in_the_test_set_is_refused(loop, tiny_vlm_dir):
    from ableaudit.adapters.dpo.unseen import TrainedImageError

    tmp = loop["tmp"]
    root = make_pairs_tree(tmp / "overlap" / "data", TEST_TREE, SIDE)
    # a COCO training picture under a PAIRS name, in another image set
    trained = read(loop["wh"], "select query_id from preference_pairs where status = 'ok'")
    picture = loop["coco_root"] / f"{trained.query_id[0]}.png"
    shutil.copy(picture, root / "status" / "phone" / "white_woman.png")
    cfg = vision_config(tmp / "overlap.yaml", "pairs_overlap", root, tiny_vlm_dir, loop["arms"])
    with pytest.raises(TrainedImageError) as err:
        audit_flow(config=str(cfg), warehouse=str(loop["wh"]), build=False)
    msg = str(err.value)
    assert msg.startswith("refused as test images")
    assert "arm(s) dpo: 1 test image(s) are in the training data of DPO adapter coco-v1" in msg
    assert "pairs_overlap:status/phone/white_woman (sha256 " in msg and "Fix:" in msg
    n = read(
        loop["wh"], "select count(*) as n from raw.generations where query_set = 'pairs_overlap'"
    )
    assert n.n[0] == 0
    # the same set without a DPO arm audits (base and prompt mitigation see no trained weights)
    base_only = vision_config(
        tmp / "overlap_base.yaml", "pairs_overlap", root, tiny_vlm_dir, loop["arms"][:2]
    )
    audit_flow(config=str(base_only), warehouse=str(loop["wh"]), build=False)
