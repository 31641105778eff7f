"""An image set's records as every loader makes them (the PAIRS tree, a CSV manifest, COCO), and the checks each image and set name passes."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ableaudit.ingest import files
from ableaudit.media import (
    MAX_IMAGE_BYTES_ENV,
    ImageSetError,
    ImageTooLarge,
    image_format,
    image_size,
    image_size_problem,
    read_image_file,
)
from ableaudit.warehouse import raw_schema

IMAGE_COLUMNS = tuple(c.name for c in raw_schema.table("images").landed())


@dataclass(frozen=True)
class ImageRecord:
    image_set: str
    image_id: str
    rel_path: str
    sha256: str
    width: int | None
    height: int | None
    scenario: str
    category: str
    gender: str
    race: str
    extra_json: str | None
    loader: str
    source: str | None

    def as_row(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in IMAGE_COLUMNS}


@dataclass
class LoadedImages:
    image_set: str
    root: Path
    records: list[ImageRecord]
    skipped: list[str] = field(
        default_factory=list
    )  # hidden files and folders, named for the report
    candidates: list[dict[str, Any]] | None = None
    """Rows of raw.image_candidates: every image a filtering loader (COCO) considered."""

    def summary(self) -> str:
        by_cat: dict[str, int] = {}
        for r in self.records:
            by_cat[r.category] = by_cat.get(r.category, 0) + 1
        cats = ", ".join(f"{k}: {v}" for k, v in sorted(by_cat.items()))
        skipped = f"; skipped {len(self.skipped)} hidden entries" if self.skipped else ""
        return f"image set {self.image_set!r}: {len(self.records)} images under {self.root} ({cats}){skipped}"


def check_image_file(
    full: Path, rel: str, problems: list[str], max_bytes: int | None = None
) -> tuple[str, int | None, int | None] | None:
    try:
        data = read_image_file(full, max_bytes)
    except ImageTooLarge as e:
        problems.append(
            f"{rel}: {e}; shrink or re-encode the image, or raise the cap with "
            f"`--max-image-bytes {max(e.size, e.cap * 2)}` (audits: the environment variable "
            f"{MAX_IMAGE_BYTES_ENV})"
        )
        return None
    except OSError as e:
        problems.append(f"{rel}: cannot be read ({e})")
        return None
    if image_format(data) is None:
        problems.append(f"{rel}: not a PNG, JPEG, GIF or WebP image (checked the file signature)")
        return None
    refused = image_size_problem(data)
    if refused is not None:
        problems.append(f"{rel}: {refused}")
        return None
    w, h = image_size(data)
    return hashlib.sha256(data).hexdigest(), w, h


def raise_problems(problems: Sequence[str], what: str, fix: str) -> None:
    if problems:
        raise ImageSetError(
            f"{what}: {len(problems)} problem(s), nothing loaded:\n{files.listed(problems)}\n"
            f"Fix: {fix}"
        )


def check_set_name(image_set: str) -> None:
    if not image_set or not re.fullmatch(r"[A-Za-z0-9_.-]+", image_set):
        raise ImageSetError(
            f"image_set {image_set!r} must be a non-empty name of letters, digits, '_', '-' or '.'"
        )
