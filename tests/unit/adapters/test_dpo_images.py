"""DPO training data that names images: a file over the byte cap is refused by its size."""

from __future__ import annotations

import os

import pytest

from ableaudit.adapters.dpo.train import DPOTrainError, check_images
from ableaudit.media import MAX_IMAGE_BYTES_ENV
from tests.fixtures.tiny_vlm import write_png

pytest.importorskip("PIL")


def _row(path) -> dict:
    prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Who?"}]}]
    return {"preference_id": "p1", "prompt": prompt, "images": [str(path)]}


def test_an_image_over_the_byte_cap_is_refused_before_pillow_reads_it(tmp_path, monkeypatch):
    good = write_png(tmp_path / "good.png", "a")
    huge = write_png(tmp_path / "huge.png", "b")
    os.truncate(huge, 6 << 30)  # sparse: no disk; Pillow would read and decode it
    data = tmp_path / "train.jsonl"
    with pytest.raises(DPOTrainError) as err:
        check_images(data, [_row(good), _row(huge)])
    message = str(err.value)
    assert "1 problem(s)" in message
    assert f"train.jsonl row 2 (preference_id p1): image {huge} is 6,442,450,944 bytes" in message
    assert "over the cap of 52,428,800; shrink it, or raise the cap with the environment " in (
        message
    )
    assert MAX_IMAGE_BYTES_ENV in message
    monkeypatch.setenv(MAX_IMAGE_BYTES_ENV, "16")
    with pytest.raises(DPOTrainError, match="good.png is [0-9,]+ bytes, over the cap of 16"):
        check_images(data, [_row(good)])
