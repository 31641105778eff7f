"""The images of a vision audit: loading an image set, checking it, landing it in ``raw.images``.

Three ways in, one table out:

* ``load_pairs_tree(root)`` reads the PAIRS dataset (Fraser & Kiritchenko 2024)
  from a local folder laid out as ``{occupations,status,potential_crime}/<scenario>/<race>_<gender>[n].png``.
  Race and gender come from the file name alone. The scenario folder is never
  read for identity: PAIRS has scenarios called ``black_apron`` and
  ``white_shirt``, which say nothing about the person pictured.
* ``load_manifest_csv(path, image_root)`` reads any other image set from a CSV
  with one row per image: ``image_id, path, scenario, gender, race``, an
  optional ``category``, and any other columns (kept as identity columns in
  ``extra_json``).
* ``ableaudit.ingest.coco.load_coco`` keeps the images of a COCO annotations
  file that show one visible person, and says why it dropped each other one.

Each way, every problem is collected first (a badly named file, a missing
file, a path escaping the image root, a file that is not an image, a file over
the byte cap, checked by its size before it is read (``max_bytes``; default
ableaudit.media.max_image_bytes()), a header that cannot be read or claims more
than ableaudit.media.MAX_IMAGE_PIXELS, a duplicate id) and reported together in
one ``ImageSetError``; nothing is guessed and nothing lands. ``land_images``
then makes ``raw.images`` hold exactly the loaded set, in one transaction, and
is idempotent: loading the same files again changes nothing. An image whose
bytes changed under an id that audits have already used is refused (its old
answers would pair with the new image).

Paths: every image path is resolved under the image root and must stay there
after resolving ``..`` and symbolic links; ``rel_path`` is stored as a POSIX
path relative to the root, so the warehouse does not depend on where the
images live on a given machine.

Decoding: ``decode_png`` is a small NumPy PNG decoder (8-bit, non-interlaced,
every colour type) for environments without Pillow; the transformers VLM
backend uses Pillow when it is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ableaudit.ingest import files
from ableaudit.ingest.image_records import (
    IMAGE_COLUMNS,
    ImageRecord,
    LoadedImages,
    check_image_file,
    check_set_name,
    raise_problems,
)
from ableaudit.media import PAIRS_CATEGORIES as PAIRS_CATEGORIES
from ableaudit.media import (
    ImageSetError,
    resolve_under,
)
from ableaudit.media import find_pairs_root as find_pairs_root
from ableaudit.warehouse import raw_schema

PAIRS_RACES = ("black", "white")
PAIRS_GENDERS = ("man", "woman")
PAIRS_NAME_RE = re.compile(r"^(?P<race>[A-Za-z]+)_(?P<gender>[A-Za-z]+)(?P<n>[0-9]*)\.png$")

MANIFEST_REQUIRED = ("image_id", "path", "scenario", "gender", "race")
MANIFEST_PATH_ALIASES = ("path", "file_path", "file", "rel_path", "image_path")
MANIFEST_OPTIONAL = ("category",)


# --------------------------------------------------------------------------- loaders


def parse_pairs_name(
    name: str, races: Iterable[str] = PAIRS_RACES, genders: Iterable[str] = PAIRS_GENDERS
) -> tuple[str, str] | str:
    """(race, gender) from a PAIRS file name such as ``white_woman1.png``, or the reason it is not one."""
    m = PAIRS_NAME_RE.match(name)
    if not m:
        return "file name is not <race>_<gender>[n].png"
    race, gender = m.group("race").lower(), m.group("gender").lower()
    races, genders = tuple(races), tuple(genders)
    if race not in races:
        return f"race {race!r} in the file name is not one of {list(races)}"
    if gender not in genders:
        return f"gender {gender!r} in the file name is not one of {list(genders)}"
    return race, gender


def load_pairs_tree(
    root: str | Path,
    image_set: str = "pairs",
    *,
    races: Iterable[str] = PAIRS_RACES,
    genders: Iterable[str] = PAIRS_GENDERS,
    max_bytes: int | None = None,
) -> LoadedImages:
    """Every image of a local PAIRS tree; see the module docstring for the layout and the rules.

    image_id is ``<category>/<scenario>/<file stem>`` (e.g. ``status/phone/white_man1``).
    Hidden files and folders (``.DS_Store``, ``.git``) are skipped and listed in
    ``skipped``; every other unexpected entry is a problem.
    """
    check_set_name(image_set)
    base = find_pairs_root(root)
    problems: list[str] = []
    records: list[ImageRecord] = []
    skipped: list[str] = []
    for cat_dir in sorted(base.iterdir()):
        rel_cat = cat_dir.name
        if rel_cat.startswith("."):
            skipped.append(rel_cat)
            continue
        if not cat_dir.is_dir():
            problems.append(
                f"{rel_cat}: a file at the top level; expected only the folders {list(PAIRS_CATEGORIES)}"
            )
            continue
        if rel_cat not in PAIRS_CATEGORIES:
            problems.append(
                f"{rel_cat}/: not a PAIRS category folder ({', '.join(PAIRS_CATEGORIES)})"
            )
            continue
        for scen_dir in sorted(cat_dir.iterdir()):
            rel_scen = f"{rel_cat}/{scen_dir.name}"
            if scen_dir.name.startswith("."):
                skipped.append(rel_scen)
                continue
            if not scen_dir.is_dir():
                problems.append(
                    f"{rel_scen}: a file directly under a category; expected scenario folders"
                )
                continue
            for f in sorted(scen_dir.iterdir()):
                rel_guess = f"{rel_scen}/{f.name}"
                if f.name.startswith("."):
                    skipped.append(rel_guess)
                    continue
                if f.is_dir():
                    problems.append(
                        f"{rel_guess}/: a folder inside a scenario folder; expected only image files"
                    )
                    continue
                parsed = parse_pairs_name(f.name, races, genders)
                if isinstance(parsed, str):
                    problems.append(f"{rel_guess}: {parsed}")
                    continue
                try:
                    full, rel = resolve_under(base, f)
                except ImageSetError as e:
                    problems.append(f"{rel_guess}: {e}")
                    continue
                checked = check_image_file(full, rel, problems, max_bytes)
                if checked is None:
                    continue
                sha, w, h = checked
                race, gender = parsed
                records.append(
                    ImageRecord(
                        image_set=image_set,
                        image_id=f"{rel_scen}/{f.stem}",
                        rel_path=rel,
                        sha256=sha,
                        width=w,
                        height=h,
                        scenario=scen_dir.name,
                        category=rel_cat,
                        gender=gender,
                        race=race,
                        extra_json=None,
                        loader="pairs_tree",
                        source=str(base),
                    )
                )
    raise_problems(
        problems,
        f"PAIRS tree {base}",
        "rename or remove the files listed (names are <race>_<gender>[n].png, race in "
        f"{list(races)}, gender in {list(genders)}), or load the set through a manifest CSV",
    )
    if not records:
        raise ImageSetError(
            f"PAIRS tree {base} holds no image; point image_root at the PAIRS data/ folder"
        )
    return LoadedImages(image_set=image_set, root=base, records=records, skipped=skipped)


def _norm_header(h: str) -> str:
    return re.sub(r"[\s\-]+", "_", (h or "").strip().lower())


def load_manifest_csv(
    path: str | Path, image_root: str | Path, image_set: str, *, max_bytes: int | None = None
) -> LoadedImages:
    """An image set described by a CSV manifest (columns in the module docstring); paths under ``image_root``."""
    check_set_name(image_set)
    mpath = Path(path).expanduser()
    if not mpath.is_file():
        raise ImageSetError(
            f"image manifest {str(path)!r} does not exist; pass a CSV with columns {list(MANIFEST_REQUIRED)}"
        )
    base = Path(image_root).expanduser()
    if not base.is_dir():
        raise ImageSetError(
            f"image_root {str(image_root)!r} is not a folder; the manifest's paths are resolved under it"
        )
    base = base.resolve()
    header, body = files.read_csv(mpath, ImageSetError)
    cols = [_norm_header(h) for h in header]
    dup_cols = sorted({c for c in cols if cols.count(c) > 1})
    if dup_cols:
        raise ImageSetError(
            f"image manifest {mpath} repeats column(s) {dup_cols} (after lower-casing)"
        )
    path_col = next((a for a in MANIFEST_PATH_ALIASES if a in cols), None)
    missing = [c for c in MANIFEST_REQUIRED if c != "path" and c not in cols]
    if path_col is None:
        missing.insert(1, "path")
    if missing:
        raise ImageSetError(
            f"image manifest {mpath} lacks column(s) {missing}; it has {cols}. "
            f"Required: {list(MANIFEST_REQUIRED)} (path may be named {list(MANIFEST_PATH_ALIASES)})"
        )
    fixed = {"image_id", path_col, "scenario", "gender", "race", *MANIFEST_OPTIONAL}
    extra_cols = [c for c in cols if c not in fixed and c not in MANIFEST_PATH_ALIASES]
    problems: list[str] = []
    records: list[ImageRecord] = []
    seen: dict[str, int] = {}
    for lineno, raw in body:
        row = {c: raw[h].strip() for c, h in zip(cols, header)}
        blank = [c for c in ("image_id", "scenario", "gender", "race") if not row[c]]
        if not row[path_col]:
            blank.insert(1, path_col)
        if blank:
            problems.append(f"line {lineno}: empty {blank}")
            continue
        iid = row["image_id"]
        if iid in seen:
            problems.append(f"line {lineno}: image_id {iid!r} repeats line {seen[iid]}")
            continue
        seen[iid] = lineno
        try:
            full, rel = resolve_under(base, row[path_col])
        except ImageSetError as e:
            problems.append(f"line {lineno}: {e}")
            continue
        if not full.is_file():
            problems.append(f"line {lineno}: {row[path_col]!r} is not a file under {base}")
            continue
        checked = check_image_file(full, f"line {lineno}: {rel}", problems, max_bytes)
        if checked is None:
            continue
        sha, w, h = checked
        extra = {c: row[c] for c in extra_cols if row[c]}
        records.append(
            ImageRecord(
                image_set=image_set,
                image_id=iid,
                rel_path=rel,
                sha256=sha,
                width=w,
                height=h,
                scenario=row["scenario"],
                category=row.get("category") or row["scenario"],
                gender=row["gender"],
                race=row["race"],
                extra_json=json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None,
                loader="manifest",
                source=str(mpath.resolve()),
            )
        )
    raise_problems(
        problems,
        f"image manifest {mpath}",
        "correct the rows listed; paths are relative to image_root "
        f"({base}) and must stay inside it",
    )
    if not records:
        raise ImageSetError(f"image manifest {mpath} lists no image")
    return LoadedImages(image_set=image_set, root=base, records=records)


# --------------------------------------------------------------------------- landing


@dataclass
class ImageLandingReport:
    inserted: int = 0
    updated: int = 0  # same id, new metadata (identity columns) or, with replace=True, new bytes
    unchanged: int = 0
    removed: int = 0  # ids of the set that the new load no longer has

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def land_images(
    warehouse: str | Path | None, loaded: LoadedImages, *, replace: bool = False
) -> ImageLandingReport:
    """Make raw.images hold exactly ``loaded`` for its image set, in one transaction.

    Unchanged rows keep their ``loaded_at``. An id whose bytes changed while
    vision generations already used it is refused unless ``replace=True``:
    its landed answers describe the old picture.
    """
    import pyarrow as pa

    from ableaudit.warehouse import connect
    from ableaudit.warehouse.reference_landing import replace_images

    rows = [r.as_row() for r in loaded.records]
    ids = [r["image_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ImageSetError(f"image set {loaded.image_set!r} repeats image ids; nothing landed")
    report = ImageLandingReport()
    con = connect(warehouse)
    try:
        existing = {
            r[0]: r
            for r in con.execute(
                f"select {', '.join(IMAGE_COLUMNS[1:])} from raw.images where image_set = ?",
                [loaded.image_set],
            ).fetchall()
        }
        fields = IMAGE_COLUMNS[1:]
        new_ids = set(ids)
        changed_bytes = [
            r["image_id"]
            for r in rows
            if r["image_id"] in existing
            and existing[r["image_id"]][fields.index("sha256")] != r["sha256"]
        ]
        if changed_bytes and not replace:
            con.register(
                "changed_ids", pa.table({"image_id": pa.array(changed_bytes, pa.string())})
            )
            used = [
                u
                for (u,) in con.execute(
                    "select distinct g.query_id from raw.generations g join changed_ids c on g.query_id = c.image_id "
                    "where g.task = 'vision' and g.query_set = ? order by 1",
                    [loaded.image_set],
                ).fetchall()
            ]
            if used:
                raise ImageSetError(
                    f"image set {loaded.image_set!r}: {len(used)} image(s) have new bytes under ids that audits already "
                    f"used, e.g. {used[:5]}; their landed answers describe the old files. Load the new files as "
                    "another image_set (e.g. pairs_v2), or pass replace=True (`--replace`) to accept the mix"
                )
        to_write = []
        for r in rows:
            old = existing.get(r["image_id"])
            if old is None:
                report.inserted += 1
                to_write.append(r)
            elif tuple(old) != tuple(r[c] for c in fields):
                report.updated += 1
                to_write.append(r)
            else:
                report.unchanged += 1
        gone = [i for i in existing if i not in new_ids]
        report.removed = len(gone)
        candidates = _changed_candidates(con, loaded)
    finally:
        con.close()
    if to_write or gone or candidates is not None:
        replace_images(
            warehouse,
            loaded.image_set,
            to_write,
            gone + [r["image_id"] for r in to_write if r["image_id"] in existing],
            candidates=candidates,
        )
    return report


def _changed_candidates(con: Any, loaded: LoadedImages) -> list[dict[str, Any]] | None:
    """The loaded set's raw.image_candidates rows when they differ from the landed ones, else None."""
    if loaded.candidates is None:
        return None
    cols = [c.name for c in raw_schema.table("image_candidates").landed()]
    landed = con.execute(
        f"select {', '.join(cols)} from raw.image_candidates where image_set = ?",
        [loaded.image_set],
    ).fetchall()
    new = {tuple(r[c] for c in cols) for r in loaded.candidates}
    return None if set(landed) == new else loaded.candidates


def load_image_set(
    image_set: str,
    image_root: str | Path,
    manifest: str | Path | None = None,
    warehouse: str | Path | None = None,
) -> LoadedImages:
    """The PAIRS tree under ``image_root``, or the manifest's images when a manifest is given: a CSV,
    or a COCO ``instances_*.json`` filtered with the settings the set was imported with
    (``ableaudit import coco``; the defaults when it was not)."""
    if manifest and Path(manifest).suffix.lower() == ".json":
        from ableaudit.ingest.coco import landed_filter, load_coco

        return load_coco(manifest, image_root, image_set, landed_filter(warehouse, image_set))
    if manifest:
        return load_manifest_csv(manifest, image_root, image_set)
    return load_pairs_tree(image_root, image_set)
