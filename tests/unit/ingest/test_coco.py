"""COCO single-person filtering: the funnel of a tiny instances file, the kept set in raw.images,
every malformed record's message, and all-or-nothing landing through `ableaudit import coco`."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import duckdb
import pytest

from ableaudit.cli.main import main
from ableaudit.ingest.coco import CocoFilter, load_coco
from ableaudit.ingest.images import land_images, load_image_set
from ableaudit.media import ImageSetError
from tests.fixtures.tiny_vlm import write_png

SIDE = 32  # every tiny image is 32 x 32 = 1,024 pixels
PERSON, DOG = 1, 18

# file name -> (annotations as (category, area, iscrowd), expected reason; None = kept)
IMAGES = {
    "zero.png": ([], "no_person"),
    "dog_only.png": ([(DOG, 300, 0)], "no_person"),
    "one_large.png": ([(PERSON, 512, 0)], None),
    "one_large_with_dog.png": ([(PERSON, 300, 0), (DOG, 200, 0)], None),
    "one_small.png": ([(PERSON, 10, 0)], "person_too_small"),
    "several.png": ([(PERSON, 400, 0), (PERSON, 5, 0)], "several_people"),
    "person_and_crowd.png": ([(PERSON, 400, 0), (PERSON, 200, 1)], "crowd"),
    "crowd_only.png": ([(PERSON, 600, 1)], "crowd"),
}


def coco_dict() -> dict:
    images, annotations = [], []
    for i, (name, (anns, _)) in enumerate(IMAGES.items(), start=1):
        images.append(
            {"id": 100 + i, "file_name": name, "width": SIDE, "height": SIDE, "license": 1 + i % 2}
        )
        for cat, area, crowd in anns:
            annotations.append(
                {
                    "id": 1000 + len(annotations),
                    "image_id": 100 + i,
                    "category_id": cat,
                    "bbox": [2.0, 3.0, 20.0, 25.0],
                    "area": area,
                    "iscrowd": crowd,
                    "segmentation": [],
                }
            )
    return {
        "info": {"description": "tiny"},
        "licenses": [
            {
                "id": 1,
                "name": "Attribution License",
                "url": "http://creativecommons.org/licenses/by/2.0/",
            },
            {
                "id": 2,
                "name": "Attribution-NonCommercial License",
                "url": "http://creativecommons.org/licenses/by-nc/2.0/",
            },
        ],
        "images": images,
        "annotations": annotations,
        "categories": [
            {"id": PERSON, "name": "person", "supercategory": "person"},
            {"id": DOG, "name": "dog", "supercategory": "animal"},
        ],
    }


def write_coco(tmp: Path, data: dict | None = None) -> tuple[Path, Path]:
    root = tmp / "images"
    for name in IMAGES:
        write_png(root / name, name, SIDE)
    ann = tmp / "instances_tiny.json"
    ann.write_text(json.dumps(data or coco_dict()))
    return ann, root


def _rows(wh: Path, sql: str) -> list[tuple]:
    """Rows as tuples, a SQL null as None."""
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(sql).fetchall()


def import_args(ann: Path, root: Path, wh: Path) -> list[str]:
    given = {"--image-root": root, "--image-set": "coco_tiny", "--warehouse": wh}
    return ["import", "coco", str(ann), *(str(x) for kv in given.items() for x in kv)]


def test_the_funnel_counts_every_image_once_by_its_first_failed_rule(tmp_path):
    ann, root = write_coco(tmp_path)
    loaded = load_coco(ann, root, "coco_tiny")
    by_file = {c["file_name"]: c for c in loaded.candidates}
    assert {f: c["reason"] for f, c in by_file.items()} == {f: r for f, (_, r) in IMAGES.items()}
    assert all((c["outcome"] == "kept") == (c["reason"] is None) for c in loaded.candidates)
    # the counts an independent tally of the spec gives
    assert len(loaded.candidates) == 8
    assert sorted(r.rel_path for r in loaded.records) == ["one_large.png", "one_large_with_dog.png"]
    assert (
        by_file["several.png"]["n_people"] == 2 and by_file["person_and_crowd.png"]["n_crowd"] == 1
    )
    assert by_file["one_small.png"]["person_area_share"] == pytest.approx(10 / 1024)
    assert by_file["one_large.png"]["person_area_share"] == pytest.approx(0.5)


def test_the_area_share_and_the_person_categories_are_settings(tmp_path):
    ann, root = write_coco(tmp_path)
    loose = load_coco(ann, root, "coco_tiny", CocoFilter(min_area_share=0.0))
    assert sorted(r.rel_path for r in loose.records) == [
        "one_large.png",
        "one_large_with_dog.png",
        "one_small.png",
    ]
    strict = load_coco(ann, root, "coco_tiny", CocoFilter(min_area_share=0.4))
    assert [r.rel_path for r in strict.records] == ["one_large.png"]  # 300/1024 < 0.4
    # a dog counted as a person: the dog beside the person makes two people, the lone dog one
    dogs = load_coco(ann, root, "coco_tiny", CocoFilter(person_categories=("person", "dog")))
    reasons = {c["file_name"]: c["reason"] for c in dogs.candidates}
    assert reasons["one_large_with_dog.png"] == "several_people" and reasons["dog_only.png"] is None
    with pytest.raises(ImageSetError, match="min_area_share 1.5 must lie in 0..1"):
        CocoFilter(min_area_share=1.5)
    with pytest.raises(ImageSetError, match=r"no category named \['human'\]"):
        load_coco(ann, root, "coco_tiny", CocoFilter(person_categories=("human",)))


def test_the_kept_set_lands_with_its_coco_id_license_and_filter(tmp_path):
    ann, root = write_coco(tmp_path)
    wh = tmp_path / "wh.duckdb"
    report = land_images(wh, load_coco(ann, root, "coco_tiny"))
    assert report.as_dict() == {"inserted": 2, "updated": 0, "unchanged": 0, "removed": 0}
    rows = _rows(
        wh,
        "select image_id, rel_path, sha256, width, height, gender, race, loader, extra_json "
        "from raw.images where image_set = 'coco_tiny' order by image_id",
    )
    assert [r[0] for r in rows] == ["one_large", "one_large_with_dog"]
    first = rows[0]
    assert first[2] == hashlib.sha256((root / "one_large.png").read_bytes()).hexdigest()
    assert first[3:8] == (SIDE, SIDE, "unlabelled", "unlabelled", "coco")
    extra = json.loads(first[8])
    assert extra["coco_image_id"] == 103 and extra["license"] == 2
    assert extra["license_name"] == "Attribution-NonCommercial License"
    assert extra["filter"] == {"min_area_share": 0.05, "person_categories": ["person"]}
    assert extra["person_area_share"] == pytest.approx(0.5)
    candidates = _rows(
        wh,
        "select outcome, reason, count(*) from raw.image_candidates where image_set = 'coco_tiny' "
        "group by all order by all",
    )
    assert candidates == [
        ("dropped", "crowd", 2),
        ("dropped", "no_person", 2),
        ("dropped", "person_too_small", 1),
        ("dropped", "several_people", 1),
        ("kept", None, 2),
    ]
    # loading the same file again changes nothing; the audit's reload keeps the imported filter
    assert land_images(wh, load_coco(ann, root, "coco_tiny")).as_dict()["unchanged"] == 2
    land_images(wh, load_coco(ann, root, "coco_tiny", CocoFilter(min_area_share=0.0)))
    reloaded = load_image_set("coco_tiny", root, ann, warehouse=wh)
    assert len(reloaded.records) == 3
    assert _rows(wh, "select count(*) from raw.image_candidates where outcome = 'kept'") == [(3,)]


def _broken(mutate) -> dict:
    data = copy.deepcopy(coco_dict())
    mutate(data)
    return data


def _ann(data: dict, file_name: str) -> dict:
    image_id = next(i["id"] for i in data["images"] if i["file_name"] == file_name)
    return next(a for a in data["annotations"] if a["image_id"] == image_id)


MALFORMED = {
    "a missing field": (
        lambda d: _ann(d, "one_small.png").pop("bbox"),
        r"annotations\[4\] \(id 1004\): missing \['bbox'\]",
    ),
    "an unknown category id": (
        lambda d: _ann(d, "several.png").update(category_id=99),
        r"annotations\[5\] \(id 1005\): category_id 99 is not in categories",
    ),
    "an unknown image id": (
        lambda d: _ann(d, "dog_only.png").update(image_id=555),
        r"annotations\[0\] \(id 1000\): image_id 555 is not in images",
    ),
    "a box outside the image": (
        lambda d: _ann(d, "one_large.png").update(bbox=[20.0, 20.0, 20.0, 20.0]),
        r"annotations\[1\] \(id 1001\): bbox \[20.0, 20.0, 20.0, 20.0\] lies outside image 103 "
        r"\(32 x 32, file one_large.png\)",
    ),
    "a repeated file name": (
        lambda d: d["images"][3].update(file_name="one_large.png"),
        r"images\[3\] \(id 104\): file_name one_large.png repeats image 103",
    ),
    "an image without its size": (
        lambda d: d["images"][1].pop("width"),  # its annotation is not listed again
        r"images\[1\] \(id 102\): missing \['width'\]",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_record_is_named_and_nothing_lands(tmp_path, capsys, case):
    mutate, message = MALFORMED[case]
    ann, root = write_coco(tmp_path, _broken(mutate))
    wh = tmp_path / "wh.duckdb"
    code = main(import_args(ann, root, wh))
    err = capsys.readouterr().err
    assert code == 2
    assert f"COCO annotations {ann}: 1 problem(s), nothing loaded" in err
    assert len(re.findall(message, err)) == 1, err
    assert not wh.exists() or _rows(wh, "select count(*) from raw.images") == [(0,)]


def test_a_kept_image_the_folder_lacks_is_named_and_nothing_lands(tmp_path, capsys):
    ann, root = write_coco(tmp_path)
    wh = tmp_path / "wh.duckdb"
    args = import_args(ann, root, wh)
    (root / "one_large_with_dog.png").unlink()
    (root / "zero.png").unlink()  # dropped: its file is never needed
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "1 problem(s)" in err
    assert (
        f"images (id 104, file one_large_with_dog.png): the folder {root.resolve()} has no file"
        in err
    )
    write_png(root / "one_large_with_dog.png", "another picture", 16)
    assert main(args) == 2
    assert "the file is 16 x 16 pixels, the annotations say 32 x 32" in capsys.readouterr().err
    assert not wh.exists() or _rows(wh, "select count(*) from raw.image_candidates") == [(0,)]
    write_png(root / "one_large_with_dog.png", "one_large_with_dog.png", SIDE)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert (
        "considered 8; dropped no_person: 2; dropped crowd: 2; dropped several_people: 1; " in out
    )
    assert "dropped person_too_small: 1; kept 2" in out
    assert _rows(wh, "select count(*) from raw.image_candidates") == [(8,)]


def test_forgetting_the_import_removes_the_kept_images_and_the_funnel_rows(tmp_path, capsys):
    ann, root = write_coco(tmp_path)
    wh = tmp_path / "wh.duckdb"
    assert main(import_args(ann, root, wh)) == 0
    (landing_id,) = _rows(wh, "select landing_id from raw.landings where kind = 'import-images'")[0]
    assert _rows(
        wh, f"select count(*) from raw.image_candidates where landing_id = '{landing_id}'"
    ) == [(8,)]
    assert main(["forget", landing_id, "--warehouse", str(wh), "--yes", "--no-build"]) == 0
    assert _rows(wh, "select count(*) from raw.images") == [(0,)]
    assert _rows(wh, "select count(*) from raw.image_candidates") == [(0,)]
