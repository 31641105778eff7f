"""The transformers VLM backend against a tiny random LLaVA built offline, and vision config rules.

The backend's output is compared with ``model.generate`` on inputs built here
independently (pixel values by NumPy arithmetic on the decoded picture, the
image placeholder expanded by hand), so a wrong preprocessing step, a wrong
number of image tokens or a lost image shows up as different text.
"""

from __future__ import annotations

import numpy as np
import pytest

from ableaudit.backends import make_backend
from ableaudit.backends.base import GenerationRequest
from ableaudit.backends.transformers_vlm import BuiltinImageProcessor, TransformersVLMBackend, _chat_messages
from ableaudit.config import ConfigError, Target, parse_config
from tiny_vlm import CLIP_MEAN, CLIP_STD, IMAGE_TOKEN, png_bytes, synthetic_pixels, tiny_vlm_dir  # noqa: F401

N_IMAGE_TOKENS = 16  # (32 / 8)^2 patches; the CLS feature is dropped ('default' strategy)


def _target(model_dir, **kw) -> Target:
    data = {"name": "vlm", "backend": "transformers", "model": str(model_dir), "task": "vision", "batch_size": 4,
            "decoding": {"max_new_tokens": 6}, "options": {"device": "cpu"}}
    data.update(kw)
    return Target.model_validate(data)


def _image(seed: str) -> bytes:
    return png_bytes(synthetic_pixels(seed), filters=(0, 1, 2, 3, 4))


def _request(key: str, image: bytes, prompt: str = "Describe the person.", temperature: float = 0.0,
             seed: int | None = 0, system: str | None = None) -> GenerationRequest:
    msgs = ({"role": "user", "content": prompt},)
    if system:
        msgs = ({"role": "system", "content": system},) + msgs
    return GenerationRequest(key=key, messages=msgs, temperature=temperature, max_new_tokens=6, seed=seed, images=(image,))


@pytest.fixture(scope="module")
def backend(tiny_vlm_dir):
    b = make_backend(_target(tiny_vlm_dir))
    yield b
    b.close()


def _reference(model_dir, image: bytes, prompt: str, system: str | None = None) -> str:
    """Greedy text from model.generate on inputs built without the backend."""
    import torch
    from transformers import AutoTokenizer, LlavaForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = LlavaForConditionalGeneration.from_pretrained(str(model_dir)).eval()
    from ableaudit.images import decode_png

    pixels = decode_png(image).astype(np.float64) / 255.0           # 32 x 32 x 3: no resize, no crop needed
    pixels = (pixels - np.array(CLIP_MEAN)) / np.array(CLIP_STD)
    pixel_values = torch.tensor(pixels.transpose(2, 0, 1)[None], dtype=torch.float32)
    text = "<|bos|>" + (f"<|system|>{system}<|eos|>" if system else "") + \
        f"<|user|>{IMAGE_TOKEN * N_IMAGE_TOKENS}{prompt}<|eos|><|assistant|>"
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pixel_values,
                             max_new_tokens=6, do_sample=False, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id)
    new = out[0, ids.shape[1]:].tolist()
    if tok.eos_token_id in new:
        new = new[: new.index(tok.eos_token_id)]
    return tok.decode(new, skip_special_tokens=True)


def test_vision_targets_dispatch_to_the_vlm_backend_with_the_papers_defaults(backend, tiny_vlm_dir):
    assert isinstance(backend, TransformersVLMBackend)
    t = Target(name="v", backend="openai", model="m", task="vision")
    assert t.decoding.max_new_tokens == 512 and t.system_prompt == ""
    t = Target(name="v", backend="openai", model="m", task="vision", decoding={"max_new_tokens": 64, "top_p": 0.9})
    assert t.decoding.max_new_tokens == 64
    assert Target(name="t", backend="openai", model="m").decoding.max_new_tokens == 1048


def test_greedy_output_matches_an_independent_generate(backend, tiny_vlm_dir):
    img = _image("person-1")
    res = backend.generate([_request("a", img), _request("b", img, system="Be brief.")])
    assert [r.status for r in res] == ["ok", "ok"]
    assert res[0].text == _reference(tiny_vlm_dir, img, "Describe the person.")
    assert res[1].text == _reference(tiny_vlm_dir, img, "Describe the person.", system="Be brief.")
    assert res[0].prompt_tokens > N_IMAGE_TOKENS and res[0].completion_tokens >= 1


def test_the_image_changes_the_answer_and_batching_does_not(backend):
    reqs = [_request(str(i), _image(f"img-{i}")) for i in range(6)]
    batched = backend.generate(reqs)
    single = [backend.generate([r])[0] for r in reqs]
    assert [r.key for r in batched] == [r.key for r in reqs]
    assert [r.text for r in batched] == [r.text for r in single]
    assert len({r.text for r in batched}) > 1  # the picture reaches the model


def test_sampling_is_seeded_per_request(backend):
    img = _image("sampled")
    a = backend.generate([_request("a", img, temperature=1.0, seed=7)])[0]
    b = backend.generate([_request("b", img, temperature=1.0, seed=7), _request("c", _image("other"), temperature=1.0, seed=3)])[0]
    assert a.text == b.text


def test_a_bad_image_fails_its_request_only(backend):
    jpeg = b"\xff\xd8\xff\xe0" + bytes(64)
    res = backend.generate([_request("ok", _image("fine")), _request("bad", jpeg)])
    assert res[0].status == "ok"
    assert res[1].status == "error" and "PNG only" in res[1].error


def test_builtin_preprocessing_resizes_and_crops_like_clip():
    proc = BuiltinImageProcessor({"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 8},
                                  "crop_size": {"height": 8, "width": 8}, "do_center_crop": True,
                                  "image_mean": [0, 0, 0], "image_std": [1, 1, 1]})
    flat = [[(200, 100, 50)] * 24 for _ in range(16)]             # 16 x 24 -> 8 x 12 -> crop 8 x 8
    out = proc(png_bytes(flat))
    assert tuple(out.shape) == (3, 8, 8)
    assert np.allclose(out[:, 0, 0].numpy(), [200 / 255, 100 / 255, 50 / 255], atol=1e-6)
    with pytest.raises(Exception, match="needs Pillow"):
        BuiltinImageProcessor({"image_processor_type": "Qwen2VLImageProcessor"})


def test_images_go_first_in_the_last_user_message():
    req = GenerationRequest(key="k", messages=({"role": "system", "content": "s"}, {"role": "user", "content": "q"}),
                            images=(b"1", b"2"))
    msgs = _chat_messages(req)
    assert msgs[0] == {"role": "system", "content": [{"type": "text", "text": "s"}]}
    assert msgs[1]["content"] == [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "q"}]


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"targets": [{"name": "v", "backend": "llamacpp", "model": "x", "task": "vision"}],
          "image_set": "pairs", "image_root": "."}, "vllm serve"),
        ({"targets": [{"name": "v", "backend": "openai", "model": "x", "task": "vision"}]}, "image_root"),
        ({"targets": [{"name": "v", "backend": "openai", "model": "x"}], "arms": [{"name": "disability_assignment"}]},
         "reserved"),
        ({"targets": [{"name": "v", "backend": "openai", "model": "x"}], "arms": [{"name": "m", "vision_prompt": "x"}]},
         "vision_prompt"),
    ],
)
def test_bad_vision_config_names_the_field(data, fragment):
    with pytest.raises(ConfigError) as err:
        parse_config(data, "v.yaml")
    assert fragment in str(err.value)


def test_missing_vlm_directory_is_a_clear_error(tmp_path):
    from ableaudit.backends import BackendError

    with pytest.raises(BackendError, match="does not exist"):
        make_backend(_target(tmp_path / "nope"))


# --------------------------------------------------------------------------- planning (no model, no warehouse)


def _prompts(sha: str = "a" * 64) -> list[dict]:
    base = {"query_set": "pairs", "query_id": "status/phone/black_man", "domain": "status", "rel_path": "status/phone/black_man.png",
            "image_sha256": sha}
    rows = [dict(base, prompt_id="p:n", prompt_kind="neutral", condition="neutral", disability_id=None, prompt_text="Describe."),
            dict(base, prompt_id="p:a", prompt_kind="assignment", condition="neutral", disability_id=None, prompt_text="Which?")]
    for d in ("hearing", "vision"):
        rows.append(dict(base, prompt_id=f"p:d:{d}", prompt_kind="disability", condition="disability", disability_id=d,
                         prompt_text=f"Describe. May have {d}."))
        rows.append(dict(base, prompt_id=f"p:m:{d}", prompt_kind="mitigation", condition="disability", disability_id=d,
                         prompt_text=f"Describe. May have {d}. Be factual."))
    return rows


def _vision_cfg(**kw):
    data = {"image_set": "pairs", "image_root": ".", "samples": 2, "vision_temperatures": [0.0, 0.5],
            "arms": [{"name": "baseline"}, {"name": "mitigation", "vision_prompt": "mitigation"}],
            "targets": [{"name": "v", "backend": "openai", "model": "m", "task": "vision"}]}
    data.update(kw)
    return parse_config(data)


def test_vision_plan_arms_probe_and_keys(tmp_path):
    from ableaudit.vision import plan_vision_generations

    cfg = _vision_cfg(probe_disability_assignment=True)
    plan = plan_vision_generations(cfg, cfg.targets[0], _prompts(), tmp_path)
    by_arm: dict[str, set] = {}
    for p in plan:
        by_arm.setdefault(p.arm, set()).add(p.prompt_id)
    assert by_arm["baseline"] == {"p:n", "p:d:hearing", "p:d:vision"}
    assert by_arm["mitigation"] == {"p:n", "p:m:hearing", "p:m:vision"}
    assert by_arm["disability_assignment"] == {"p:a"}
    assert len(plan) == (3 + 3 + 1) * 2 * 2 and len({p.generation_id for p in plan}) == len(plan)
    assert {p.task for p in plan} == {"vision"} and {p.temperature for p in plan} == {0.0, 0.5}
    assert all(p.image_rel_path == "status/phone/black_man.png" and p.image_root == str(tmp_path.resolve()) for p in plan)
    assert all(p.max_new_tokens == 512 and p.system_prompt == "" for p in plan)
    # the image's bytes are part of the key; nothing else about the plan changes with them
    other = plan_vision_generations(cfg, cfg.targets[0], _prompts("b" * 64), tmp_path)
    assert not {p.generation_id for p in plan} & {p.generation_id for p in other}
    again = plan_vision_generations(cfg, cfg.targets[0], _prompts(), tmp_path)
    assert [p.generation_id for p in again] == [p.generation_id for p in plan]
    # a target's own temperature wins over vision_temperatures
    cfg2 = _vision_cfg(targets=[{"name": "v", "backend": "openai", "model": "m", "task": "vision",
                                 "decoding": {"temperature": 0.3}}])
    assert {p.temperature for p in plan_vision_generations(cfg2, cfg2.targets[0], _prompts(), tmp_path)} == {0.3}


def test_planned_vision_request_carries_the_checked_image(tmp_path):
    import hashlib

    from ableaudit.images import ImageSetError
    from ableaudit.vision import plan_vision_generations

    data = _image("on-disk")
    (tmp_path / "status" / "phone").mkdir(parents=True)
    (tmp_path / "status" / "phone" / "black_man.png").write_bytes(data)
    cfg = _vision_cfg()
    plan = plan_vision_generations(cfg, cfg.targets[0], _prompts(hashlib.sha256(data).hexdigest()), tmp_path)
    req = plan[0].request()
    assert req.images == (data,) and req.messages == ({"role": "user", "content": plan[0].prompt_text},)
    assert "image_root" not in __import__("ableaudit.landing", fromlist=["x"]).GENERATION_COLUMNS
    stale = plan_vision_generations(cfg, cfg.targets[0], _prompts("c" * 64), tmp_path)[0]
    with pytest.raises(ImageSetError, match="changed since it was loaded"):
        stale.request()


def test_text_targets_plan_as_before():
    """A text-only config plans exactly what it planned before vision existed (same keys)."""
    from ableaudit.planning import plan_generations

    cfg = parse_config({"targets": [{"name": "t", "backend": "openai", "model": "m"}], "samples": 1})
    prompt = {"prompt_id": "ableaudit:q1:neutral", "prompt_text": "Hello?", "query_set": "ableaudit", "query_id": "q1",
              "domain": "education", "disability_id": None, "condition": "neutral"}
    (p,) = plan_generations(cfg, cfg.targets[0], [prompt])
    assert p.image_rel_path is None and p.request().images == ()
    assert p.system_prompt == "You are a helpful assistant." and p.max_new_tokens == 1048 and p.temperature == 0.1
