"""A tiny, offline, random-init vision-language model, synthetic images and a fake PAIRS tree, for tests.

The VLM is a LLaVA (a 1-layer CLIP vision tower on 32 x 32 images in 8 x 8
patches, a projector, and the 2-layer Llama of tests/tiny_models.py) with the
tiny byte-level tokenizer plus an ``<image>`` token and a chat template that
places images from content parts. Saved beside it: ``preprocessor_config.json``
(a CLIPImageProcessor's settings) and ``processor_config.json`` (LlavaProcessor:
patch size, feature strategy, one CLS token), so the same directory loads
through ``AutoProcessor`` (Pillow, in the lock) and through the backend's
built-in image path; tests run both (``image_processing: processor | builtin``)
and train DPO adapters on it. Outputs are gibberish; tests compare the backend
with ``model.generate`` on the same inputs, not with prose.

PNG files are written by ``png_bytes``, a minimal encoder written here (zlib
and struct only, every PNG row filter), so the project's decoder is checked
against code it does not share.

Fixtures (``scope="session"``): ``tiny_vlm_dir`` -> Path.
"""

from __future__ import annotations

import json
import random
import struct
import zlib
from pathlib import Path

import pytest

from tiny_models import build_tiny_tokenizer

IMAGE_TOKEN = "<image>"
IMAGE_SIZE, PATCH_SIZE = 32, 8
VLM_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


# --------------------------------------------------------------------------- PNG writing


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def png_bytes(pixels: list[list[tuple[int, ...]]], filters: tuple[int, ...] = (0,)) -> bytes:
    """Encode rows of RGB (or RGBA) tuples as an 8-bit PNG; row y uses filter filters[y % len(filters)]."""
    height, width, ch = len(pixels), len(pixels[0]), len(pixels[0][0])
    color = {3: 2, 4: 6, 1: 0}[ch]
    raw = bytearray()
    prev = [0] * (width * ch)
    for y, row in enumerate(pixels):
        line = [v for px in row for v in px]
        f = filters[y % len(filters)]
        out = []
        for i, x in enumerate(line):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            pred = (0, a, b, (a + b) // 2, _paeth(a, b, c))[f]
            out.append((x - pred) & 0xFF)
        raw.append(f)
        raw += bytes(out)
        prev = line

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b"")


def synthetic_pixels(seed: str, size: int = IMAGE_SIZE) -> list[list[tuple[int, int, int]]]:
    """A small picture that differs from image to image: a gradient with a seeded colour block."""
    rnd = random.Random(seed)
    base = (rnd.randrange(256), rnd.randrange(256), rnd.randrange(256))
    x0, y0 = rnd.randrange(size // 2), rnd.randrange(size // 2)
    rows = []
    for y in range(size):
        row = []
        for x in range(size):
            if x0 <= x < x0 + size // 3 and y0 <= y < y0 + size // 3:
                row.append(base)
            else:
                row.append(((x * 8) % 256, (y * 8) % 256, (x * y) % 256))
        rows.append(row)
    return rows


def write_png(path: Path, seed: str, size: int = IMAGE_SIZE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(synthetic_pixels(seed, size), filters=(0, 1, 2, 3, 4)))
    return path


# --------------------------------------------------------------------------- a fake PAIRS tree

# Two categories, two scenarios each, one of them named like a race to catch a
# loader reading identity from folder names; one file with a number suffix.
FAKE_PAIRS = {
    "occupations": {
        "black_apron": ["black_man", "black_woman", "white_man", "white_woman1"],
        "lab_coat": ["black_man", "black_woman", "white_man", "white_woman"],
    },
    "status": {
        "white_shirt": ["black_man", "black_woman", "white_man", "white_woman"],
        "phone": ["black_man", "black_woman", "white_man1", "white_woman"],
    },
}


def make_pairs_tree(root: Path, spec: dict | None = None, size: int = IMAGE_SIZE) -> Path:
    """A PAIRS-like tree ``root/<category>/<scenario>/<race>_<gender>[n].png`` of synthetic PNGs; returns root."""
    for cat, scenarios in (spec or FAKE_PAIRS).items():
        for scen, stems in scenarios.items():
            for stem in stems:
                write_png(root / cat / scen / f"{stem}.png", f"{cat}/{scen}/{stem}", size)
    return root


# --------------------------------------------------------------------------- the tiny VLM


def build_tiny_vlm(out_dir: str | Path, seed: int = 0) -> Path:
    """Save a random-init tiny LLaVA, its tokenizer and its processor settings to ``out_dir``."""
    import torch
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tiny_tokenizer(out)
    tok.add_tokens([IMAGE_TOKEN], special_tokens=True)
    tok.chat_template = VLM_CHAT_TEMPLATE
    tok.save_pretrained(str(out))
    image_token_id = tok.convert_tokens_to_ids(IMAGE_TOKEN)
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                              image_size=IMAGE_SIZE, patch_size=PATCH_SIZE, projection_dim=16)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                       tie_word_embeddings=False)
    n_image_tokens = (IMAGE_SIZE // PATCH_SIZE) ** 2
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token_id,
                         vision_feature_select_strategy="default", vision_feature_layer=-1,
                         image_seq_length=n_image_tokens)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.save_pretrained(str(out))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "CLIPImageProcessor",
        "processor_class": "LlavaProcessor",
        "do_convert_rgb": True,
        "do_resize": True,
        "size": {"shortest_edge": IMAGE_SIZE},
        "resample": 3,
        "do_center_crop": True,
        "crop_size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
    }, indent=2))
    (out / "processor_config.json").write_text(json.dumps({
        "processor_class": "LlavaProcessor",
        "image_token": IMAGE_TOKEN,
        "patch_size": PATCH_SIZE,
        "vision_feature_select_strategy": "default",
        "num_additional_image_tokens": 1,
    }, indent=2))
    return out


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_llava"))
