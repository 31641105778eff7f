"""COCO images with one visible person: the training population of the VLM paper's DPO (section 6.2).

``load_coco(annotations, image_root, image_set)`` reads a COCO ``instances_*.json``
(its ``images``, ``annotations`` and ``categories``, and ``licenses`` when present)
and the local folder its ``file_name`` values are under. Nothing is downloaded.

Each image of the file is *considered* and then kept or dropped by the first rule it
fails, in this order (``DROP_REASONS``):

1. ``no_person``: no annotation of a person-like category (``person_categories``,
   default COCO's ``person``);
2. ``crowd``: a person-like annotation marked ``iscrowd: 1`` (a group of people
   annotated as one region: other people are in the picture);
3. ``several_people``: more than one person-like annotation, however small the
   others are;
4. ``person_too_small``: the one person covers less than ``min_area_share`` of the
   image. Visible is taken to mean the person's segmented pixels (COCO's ``area``,
   the mask area, not the box, which also holds background) cover at least that share
   of ``width x height``: a person a captioner can see and describe, not a speck in
   the distance.

What is kept lands in ``raw.images`` (loader ``coco``) with the COCO image id, its
license and the filter settings in ``extra_json``; every considered image lands in
``raw.image_candidates`` with its outcome and reason, counted by the ``image_funnel``
mart. COCO has no gender or race labels: those columns say ``unlabelled``.

A malformed file lands nothing: a missing field, an unknown image or category id,
a box outside its image (beyond ``BOX_TOLERANCE_PX``), a kept image the folder
lacks or whose size differs from the annotations are all listed in one
``ImageSetError`` naming each record.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ableaudit.ingest.image_records import (
    ImageRecord,
    LoadedImages,
    check_image_file,
    check_set_name,
    raise_problems,
)
from ableaudit.media import ImageSetError, resolve_under

LOADER = "coco"
UNLABELLED = "unlabelled"
DROP_REASONS = ("no_person", "crowd", "several_people", "person_too_small")
BOX_TOLERANCE_PX = 1.0
"""COCO boxes are floats rounded to two decimals; a box may overhang its image by this much."""

IMAGE_FIELDS = ("id", "file_name", "width", "height")
ANNOTATION_FIELDS = ("id", "image_id", "category_id", "bbox", "area", "iscrowd")
CATEGORY_FIELDS = ("id", "name")


@dataclass(frozen=True)
class CocoFilter:
    """Which COCO images count as showing one visible person (the VLM paper's training set)."""

    min_area_share: float = 0.05
    """The person's mask area over the image's area must reach this (0..1). The paper gives no
    figure; 5% of a 640 x 480 COCO image is about 15,000 pixels, a person of roughly 100 x 150
    pixels, well above COCO's own 'small object' bound of 32 x 32."""
    person_categories: tuple[str, ...] = ("person",)
    """COCO category names that count as a person (kept or other)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_area_share <= 1.0:
            raise ImageSetError(
                f"min_area_share {self.min_area_share} must lie in 0..1 (a share of the image's area)"
            )
        if not self.person_categories:
            raise ImageSetError("person_categories must name at least one COCO category")

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "person_categories": list(self.person_categories)}


@dataclass
class CocoCandidate:
    """One image of the annotations file and what the filter decided."""

    coco_image_id: int
    """COCO's image id."""
    file_name: str
    """Its file under the image root."""
    reason: str | None
    """None: kept; else the first rule it fails (DROP_REASONS)."""
    n_people: int
    """Person-like annotations that are not crowds."""
    n_crowd: int
    """Person-like crowd annotations."""
    person_area_share: float | None
    """The one person's mask area over the image area; None unless exactly one person."""

    def as_row(self, image_set: str, source: str) -> dict[str, Any]:
        return {
            "image_set": image_set,
            "candidate_id": str(self.coco_image_id),
            "file_name": self.file_name,
            "outcome": "kept" if self.reason is None else "dropped",
            "reason": self.reason,
            "n_people": self.n_people,
            "n_crowd": self.n_crowd,
            "person_area_share": self.person_area_share,
            "loader": LOADER,
            "source": source,
        }


@dataclass
class _Person:
    annotation_id: Any
    area: float
    crowd: bool


@dataclass
class _Image:
    raw: dict[str, Any]
    people: list[_Person] = field(default_factory=list)


def _missing(record: Any, names: tuple[str, ...]) -> list[str]:
    if not isinstance(record, dict):
        return list(names)
    return [n for n in names if record.get(n) is None]


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ImageSetError(
            f"COCO annotations {str(path)!r} do not exist; pass an instances_*.json file"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ImageSetError(f"COCO annotations {path} are not JSON ({e})") from None
    bad = (
        [k for k in ("images", "annotations", "categories") if not isinstance(data.get(k), list)]
        if isinstance(data, dict)
        else ["images", "annotations", "categories"]
    )
    if bad:
        raise ImageSetError(
            f"COCO annotations {path} lack the list(s) {bad}; an instances_*.json file has "
            "images, annotations and categories"
        )
    return data


def _index_images(data: dict[str, Any], problems: list[str]) -> dict[Any, _Image]:
    images: dict[Any, _Image] = {}
    files: dict[str, Any] = {}
    for i, im in enumerate(data["images"]):
        name = f"images[{i}]" + (f" (id {im.get('id')})" if isinstance(im, dict) else "")
        missing = _missing(im, IMAGE_FIELDS)
        if missing:
            problems.append(f"{name}: missing {missing}")
            continue
        if (
            not (_number(im["width"]) and _number(im["height"]))
            or min(im["width"], im["height"]) <= 0
        ):
            problems.append(f"{name}: width and height must be positive numbers")
            continue
        if im["id"] in images:
            problems.append(f"{name}: image id {im['id']} repeats an earlier image")
            continue
        if im["file_name"] in files:
            problems.append(
                f"{name}: file_name {im['file_name']} repeats image {files[im['file_name']]}"
            )
        files.setdefault(im["file_name"], im["id"])
        images[im["id"]] = _Image(im)
    return images


def _person_ids(data: dict[str, Any], settings: CocoFilter, problems: list[str]) -> tuple[set, set]:
    """(every category id, the person-like ones)."""
    known, people = set(), set()
    for i, cat in enumerate(data["categories"]):
        missing = _missing(cat, CATEGORY_FIELDS)
        if missing:
            problems.append(f"categories[{i}]: missing {missing}")
            continue
        known.add(cat["id"])
        if cat["name"] in settings.person_categories:
            people.add(cat["id"])
    names = {c.get("name") for c in data["categories"] if isinstance(c, dict)}
    absent = [c for c in settings.person_categories if c not in names]
    if absent:
        problems.append(
            f"categories: no category named {absent}; person_categories must be COCO category "
            f"names (this file has e.g. {sorted(n for n in names if n)[:5]})"
        )
    return known, people


def _attach_annotations(
    data: dict[str, Any], images: dict[Any, _Image], known: set, people: set, problems: list[str]
) -> None:
    rejected = {im.get("id") for im in data["images"] if isinstance(im, dict)} - images.keys()
    for i, ann in enumerate(data["annotations"]):
        name = f"annotations[{i}]" + (f" (id {ann.get('id')})" if isinstance(ann, dict) else "")
        missing = _missing(ann, ANNOTATION_FIELDS)
        if missing:
            problems.append(f"{name}: missing {missing}")
            continue
        image = images.get(ann["image_id"])
        if image is None:
            if ann["image_id"] not in rejected:  # else its image's own problem is listed
                problems.append(f"{name}: image_id {ann['image_id']} is not in images")
            continue
        if ann["category_id"] not in known:
            problems.append(f"{name}: category_id {ann['category_id']} is not in categories")
            continue
        box = ann["bbox"]
        if not (isinstance(box, list) and len(box) == 4 and all(map(_number, box))):
            problems.append(f"{name}: bbox {box!r} is not [x, y, width, height]")
            continue
        x, y, w, h = box
        width, height = image.raw["width"], image.raw["height"]
        tol = BOX_TOLERANCE_PX
        if w < 0 or h < 0 or x < -tol or y < -tol or x + w > width + tol or y + h > height + tol:
            problems.append(
                f"{name}: bbox {box} lies outside image {ann['image_id']} "
                f"({width} x {height}, file {image.raw['file_name']})"
            )
            continue
        if not _number(ann["area"]) or ann["area"] < 0:
            problems.append(f"{name}: area {ann['area']!r} is not a number of pixels")
            continue
        if ann["iscrowd"] not in (0, 1):
            problems.append(f"{name}: iscrowd {ann['iscrowd']!r} is not 0 or 1")
            continue
        if ann["category_id"] in people:
            image.people.append(_Person(ann["id"], float(ann["area"]), ann["iscrowd"] == 1))


def decide(image: dict[str, Any], people: list[_Person], settings: CocoFilter) -> CocoCandidate:
    """The filter's verdict on one image: the first rule of DROP_REASONS it fails, else kept."""
    single = [p for p in people if not p.crowd]
    n_crowd = len(people) - len(single)
    share = single[0].area / (image["width"] * image["height"]) if len(single) == 1 else None
    if not people:
        reason = "no_person"
    elif n_crowd:
        reason = "crowd"
    elif len(single) > 1:
        reason = "several_people"
    elif share is not None and share < settings.min_area_share:
        reason = "person_too_small"
    else:
        reason = None
    return CocoCandidate(image["id"], str(image["file_name"]), reason, len(single), n_crowd, share)


def _licenses(data: dict[str, Any]) -> dict[Any, dict[str, Any]]:
    return {lic.get("id"): lic for lic in data.get("licenses") or [] if isinstance(lic, dict)}


def load_coco(
    annotations: str | Path,
    image_root: str | Path,
    image_set: str,
    settings: CocoFilter | None = None,
    *,
    max_bytes: int | None = None,
) -> LoadedImages:
    """The images of ``annotations`` that show one visible person, and the verdict on every image.

    The returned set's ``candidates`` are the rows of raw.image_candidates; its records those of
    raw.images. Every problem of the file and of the kept images' files is listed in one error.
    """
    check_set_name(image_set)
    settings = settings or CocoFilter()
    path = Path(annotations).expanduser()
    data = _read(path)
    base = Path(image_root).expanduser()
    if not base.is_dir():
        raise ImageSetError(
            f"image root {str(image_root)!r} is not a folder; pass the folder holding the COCO "
            "images (e.g. val2017/)"
        )
    base = base.resolve()
    problems: list[str] = []
    images = _index_images(data, problems)
    known, people = _person_ids(data, settings, problems)
    _attach_annotations(data, images, known, people, problems)
    raise_problems(
        problems, f"COCO annotations {path}", "correct the records listed; nothing was landed"
    )
    licenses = _licenses(data)
    source = str(path.resolve())
    candidates, records = [], []
    for image in images.values():
        verdict = decide(image.raw, image.people, settings)
        candidates.append(verdict)
        if verdict.reason is None:
            record = _record(
                image, verdict, licenses, settings, base, image_set, source, problems, max_bytes
            )
            if record is not None:
                records.append(record)
    raise_problems(
        problems,
        f"COCO images under {base}",
        f"put the kept images' files under {base} (the folder the annotations' file_name values "
        "are relative to), or correct their annotations",
    )
    if not records:
        raise ImageSetError(
            f"no image of {path} shows one visible person under the filter {settings.as_json()}; "
            "check --image-root and the annotations file, or lower --min-area-share"
        )
    loaded = LoadedImages(image_set=image_set, root=base, records=records)
    loaded.candidates = [c.as_row(image_set, source) for c in candidates]
    return loaded


def _record(
    image: _Image,
    verdict: CocoCandidate,
    licenses: dict[Any, dict[str, Any]],
    settings: CocoFilter,
    base: Path,
    image_set: str,
    source: str,
    problems: list[str],
    max_bytes: int | None,
) -> ImageRecord | None:
    im = image.raw
    name = f"images (id {im['id']}, file {im['file_name']})"
    try:
        full, rel = resolve_under(base, im["file_name"])
    except ImageSetError as e:
        problems.append(f"{name}: {e}")
        return None
    if not full.is_file():
        problems.append(f"{name}: the folder {base} has no file {im['file_name']}")
        return None
    checked = check_image_file(full, name, problems, max_bytes)
    if checked is None:
        return None
    sha, w, h = checked
    if (w, h) != (im["width"], im["height"]):
        problems.append(
            f"{name}: the file is {w} x {h} pixels, the annotations say "
            f"{im['width']} x {im['height']}: not the picture they describe"
        )
        return None
    lic = licenses.get(im.get("license"), {})
    extra = {
        "coco_image_id": im["id"],
        "license": im.get("license"),
        "license_name": lic.get("name"),
        "license_url": lic.get("url"),
        "person_annotation_id": image.people[0].annotation_id,
        "person_area_share": round(verdict.person_area_share or 0.0, 6),
        "filter": settings.as_json(),
    }
    return ImageRecord(
        image_set=image_set,
        image_id=str(Path(rel).with_suffix("")),
        rel_path=rel,
        sha256=sha,
        width=w,
        height=h,
        scenario=str(Path(rel).with_suffix("")),
        category=settings.person_categories[0],
        gender=UNLABELLED,
        race=UNLABELLED,
        extra_json=json.dumps(extra, sort_keys=True, ensure_ascii=False),
        loader=LOADER,
        source=source,
    )


def landed_filter(warehouse: str | Path | None, image_set: str) -> CocoFilter | None:
    """The filter settings the image set was landed with (``ableaudit import coco``), if it was."""
    from ableaudit.warehouse import connect

    con = connect(warehouse)
    try:
        row = con.execute(
            "select extra_json from raw.images where image_set = ? and loader = ? limit 1",
            [image_set, LOADER],
        ).fetchone()
    finally:
        con.close()
    if row is None or not row[0]:
        return None
    saved = json.loads(row[0]).get("filter") or {}
    return CocoFilter(
        min_area_share=float(saved.get("min_area_share", CocoFilter.min_area_share)),
        person_categories=tuple(saved.get("person_categories") or CocoFilter.person_categories),
    )


def funnel_lines(loaded: LoadedImages) -> list[str]:
    """The funnel as lines for the terminal: considered, dropped per reason, kept."""
    rows = loaded.candidates or []
    counts = {r: sum(c["reason"] == r for c in rows) for r in DROP_REASONS}
    kept = sum(c["reason"] is None for c in rows)
    return [
        f"considered {len(rows)}",
        *(f"dropped {r}: {n}" for r, n in counts.items()),
        f"kept {kept}",
    ]
