"""The transformers VLM backend against a tiny random LLaVA built offline, and vision config rules.

Both image paths run (the backend fixture is parametrised over
``image_processing: processor | builtin``). Their output is compared with
``model.generate`` on inputs built here independently (pixel values by NumPy
arithmetic on the decoded picture, the image placeholder expanded by hand), and
the processor path also with ``generate`` on LlavaProcessor's own inputs, so a
wrong preprocessing step, a wrong number of image tokens or a lost image shows
up as different text. A checkpoint with incomplete processor files falls back
to the built-in path under ``auto`` and fails with the fix under ``processor``.
"""

from __future__ import annotations

import functools
import io
import json
import shutil

import numpy as np
import pytest

from ableaudit.backends import make_backend
from ableaudit.backends.transformers_vlm import (
    BuiltinImageProcessor,
    TransformersVLMBackend,
    _chat_messages,
)
from ableaudit.config import ConfigError, Target, parse_config
from ableaudit.records import GenerationRequest
from tests.fixtures.tiny_vlm import CLIP_MEAN, CLIP_STD, IMAGE_TOKEN, png_bytes, synthetic_pixels  # noqa: F401

N_IMAGE_TOKENS = 16  # (32 / 8)^2 patches; the CLS feature is dropped ('default' strategy)


def _target(model_dir, **kw) -> Target:
    data = {
        "name": "vlm",
        "backend": "transformers",
        "model": str(model_dir),
        "task": "vision",
        "batch_size": 4,
        "decoding": {"max_new_tokens": 6},
        "options": {"device": "cpu"},
    }
    data.update(kw)
    return Target.model_validate(data)


def _image(seed: str) -> bytes:
    return png_bytes(synthetic_pixels(seed), filters=(0, 1, 2, 3, 4))


def _request(
    key: str,
    image: bytes,
    prompt: str = "Describe the person.",
    temperature: float = 0.0,
    seed: int | None = 0,
    system: str | None = None,
) -> GenerationRequest:
    msgs = ({"role": "user", "content": prompt},)
    if system:
        msgs = ({"role": "system", "content": system},) + msgs
    return GenerationRequest(
        key=key,
        messages=msgs,
        temperature=temperature,
        max_new_tokens=6,
        seed=seed,
        images=(image,),
    )


MODES = ["processor", "builtin"]


@pytest.fixture(scope="module", params=MODES)
def backend(request, tiny_vlm_dir):
    b = make_backend(
        _target(tiny_vlm_dir, options={"device": "cpu", "image_processing": request.param})
    )
    yield b
    b.close()


@functools.cache
def _model_and_tokenizer(model_dir: str):
    from transformers import AutoTokenizer, LlavaForConditionalGeneration

    return (
        LlavaForConditionalGeneration.from_pretrained(model_dir).eval(),
        AutoTokenizer.from_pretrained(model_dir),
    )


def _hand_text(prompt: str, system: str | None, n_image_tokens: int) -> str:
    return (
        "<|bos|>"
        + (f"<|system|>{system}<|eos|>" if system else "")
        + f"<|user|>{IMAGE_TOKEN * n_image_tokens}{prompt}<|eos|><|assistant|>"
    )


def _greedy(model_dir, input_ids, pixel_values) -> str:
    import torch

    model, tok = _model_and_tokenizer(str(model_dir))
    with torch.inference_mode():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            pixel_values=pixel_values,
            max_new_tokens=6,
            do_sample=False,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
    new = out[0, input_ids.shape[1] :].tolist()
    if tok.eos_token_id in new:
        new = new[: new.index(tok.eos_token_id)]
    return tok.decode(new, skip_special_tokens=True)


def _numpy_inputs(model_dir, image: bytes, prompt: str, system: str | None = None):
    """Inputs built without the backend or any processor: NumPy pixels, the placeholder expanded by hand."""
    import torch

    from ableaudit.media import decode_png

    _, tok = _model_and_tokenizer(str(model_dir))
    pixels = decode_png(image).astype(np.float64) / 255.0  # 32 x 32 x 3: no resize, no crop needed
    pixels = (pixels - np.array(CLIP_MEAN)) / np.array(CLIP_STD)
    pixel_values = torch.tensor(pixels.transpose(2, 0, 1)[None], dtype=torch.float32)
    ids = tok(
        _hand_text(prompt, system, N_IMAGE_TOKENS), add_special_tokens=False, return_tensors="pt"
    )["input_ids"]
    return ids, pixel_values


def _reference(model_dir, image: bytes, prompt: str, system: str | None = None) -> str:
    """Greedy text from model.generate on inputs built without the backend."""
    return _greedy(model_dir, *_numpy_inputs(model_dir, image, prompt, system))


def _processor_inputs(model_dir, image: bytes, prompt: str, system: str | None = None):
    """LlavaProcessor's own inputs (Pillow decoding, its image processor, its placeholder expansion)."""
    from PIL import Image
    from transformers import LlavaProcessor

    proc = LlavaProcessor.from_pretrained(str(model_dir))
    enc = proc(
        images=[Image.open(io.BytesIO(image)).convert("RGB")],
        text=[_hand_text(prompt, system, 1)],
        return_tensors="pt",
        add_special_tokens=False,
    )
    return enc["input_ids"], enc["pixel_values"]


def test_vision_targets_dispatch_to_the_vlm_backend_with_the_papers_defaults(backend, tiny_vlm_dir):
    assert isinstance(backend, TransformersVLMBackend)
    assert backend.mode == backend.target.options["image_processing"] and backend.mode_note is None
    assert (backend.processor is not None) == (backend.mode == "processor")
    t = Target(name="v", backend="openai", model="m", task="vision")
    assert t.decoding.max_new_tokens == 512 and t.system_prompt == ""
    t = Target(
        name="v",
        backend="openai",
        model="m",
        task="vision",
        decoding={"max_new_tokens": 64, "top_p": 0.9},
    )
    assert t.decoding.max_new_tokens == 64
    assert Target(name="t", backend="openai", model="m").decoding.max_new_tokens == 1048


def test_greedy_output_matches_an_independent_generate(backend, tiny_vlm_dir):
    img = _image("person-1")
    res = backend.generate([_request("a", img), _request("b", img, system="Be brief.")])
    assert [r.status for r in res] == ["ok", "ok"]
    assert res[0].text == _reference(tiny_vlm_dir, img, "Describe the person.")
    assert res[1].text == _reference(tiny_vlm_dir, img, "Describe the person.", system="Be brief.")
    assert res[0].prompt_tokens > N_IMAGE_TOKENS and res[0].completion_tokens >= 1
    assert {r.model_revision for r in res} == {
        backend.model_revision
    }  # the loaded VLM answered both


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
    b = backend.generate(
        [
            _request("b", img, temperature=1.0, seed=7),
            _request("c", _image("other"), temperature=1.0, seed=3),
        ]
    )[0]
    assert a.text == b.text


def test_a_bad_image_fails_its_request_only(backend):
    jpeg = b"\xff\xd8\xff\xe0" + bytes(64)
    res = backend.generate([_request("ok", _image("fine")), _request("bad", jpeg)])
    assert res[0].status == "ok"
    expected = (
        "cannot decode image 1 of the request (68 bytes, format jpeg)"
        if backend.mode == "processor"
        else "PNG only"
    )
    assert res[1].status == "error" and expected in res[1].error


def test_processor_path_matches_generate_on_llava_processor_inputs(tiny_vlm_dir):
    """The processor path against plain HF: LlavaProcessor's inputs into model.generate, no backend code."""
    b = make_backend(
        _target(tiny_vlm_dir, options={"device": "cpu", "image_processing": "processor"})
    )
    try:
        imgs = [_image("proc-1"), _image("proc-2")]
        res = b.generate([_request("a", imgs[0]), _request("b", imgs[1], system="Be brief.")])
    finally:
        b.close()
    assert [r.status for r in res] == ["ok", "ok"]
    for r, img, system in zip(res, imgs, (None, "Be brief.")):
        ids, pixels = _processor_inputs(tiny_vlm_dir, img, "Describe the person.", system)
        assert r.text == _greedy(tiny_vlm_dir, ids, pixels)
        # the processor's inputs are the ones built by hand: the same ids, the same pixels (to float rounding)
        hand_ids, hand_pixels = _numpy_inputs(tiny_vlm_dir, img, "Describe the person.", system)
        assert ids.tolist() == hand_ids.tolist() and r.prompt_tokens == ids.shape[1]
        assert float((pixels - hand_pixels).abs().max()) < 1e-5
    assert res[0].text != res[1].text or imgs[0] == imgs[1]


def _broken_copy(src, dst, *, drop=(), processor_update=None):
    shutil.copytree(src, dst)
    for name in drop:
        (dst / name).unlink()
    if processor_update:
        cfg = json.loads((dst / "processor_config.json").read_text())
        cfg.update(processor_update)
        (dst / "processor_config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize(
    "drop, update, problem",
    [
        (("processor_config.json",), None, "cannot encode a probe picture"),  # no patch_size
        (
            (),
            {"num_additional_image_tokens": 0},
            "expands the image placeholder to 15 tokens, but the vision tower yields 16",
        ),
    ],
)
def test_incomplete_processor_files_fall_back_under_auto_and_fail_under_processor(
    tiny_vlm_dir, tmp_path, drop, update, problem
):
    from ableaudit.backends import BackendError

    broken = _broken_copy(tiny_vlm_dir, tmp_path / "vlm", drop=drop, processor_update=update)
    with pytest.raises(BackendError) as err:
        make_backend(_target(broken, options={"device": "cpu", "image_processing": "processor"}))
    msg = str(err.value)
    assert (
        problem in msg
        and "Fix:" in msg
        and "image_processing: builtin" in msg
        and "processor_config.json" in msg
    )
    b = make_backend(_target(broken, options={"device": "cpu", "image_processing": "auto"}))
    try:
        assert b.mode == "builtin" and b.processor is None and problem in b.mode_note
        img = _image("fallback")
        (res,) = b.generate([_request("a", img)])
    finally:
        b.close()
    assert res.status == "ok" and res.text == _reference(tiny_vlm_dir, img, "Describe the person.")


def test_no_image_processor_at_all_is_one_clear_error_under_auto(tiny_vlm_dir, tmp_path):
    from ableaudit.backends import BackendError

    broken = _broken_copy(
        tiny_vlm_dir, tmp_path / "vlm", drop=("processor_config.json", "preprocessor_config.json")
    )
    with pytest.raises(BackendError) as err:
        make_backend(_target(broken, options={"device": "cpu"}))
    msg = str(err.value)
    assert (
        "is incomplete: AutoProcessor cannot load it" in msg
        and "built-in image path cannot take over" in msg
    )
    assert msg.count("Fix:") == 1 and "preprocessor_config.json" in msg.split("Fix:")[1]


def test_builtin_preprocessing_resizes_and_crops_like_clip():
    proc = BuiltinImageProcessor(
        {
            "image_processor_type": "CLIPImageProcessor",
            "size": {"shortest_edge": 8},
            "crop_size": {"height": 8, "width": 8},
            "do_center_crop": True,
            "image_mean": [0, 0, 0],
            "image_std": [1, 1, 1],
        }
    )
    flat = [[(200, 100, 50)] * 24 for _ in range(16)]  # 16 x 24 -> 8 x 12 -> crop 8 x 8
    out = proc(png_bytes(flat))
    assert tuple(out.shape) == (3, 8, 8)
    assert np.allclose(out[:, 0, 0].numpy(), [200 / 255, 100 / 255, 50 / 255], atol=1e-6)
    with pytest.raises(Exception, match="needs Pillow"):
        BuiltinImageProcessor({"image_processor_type": "Qwen2VLImageProcessor"})


def test_images_go_first_in_the_last_user_message():
    req = GenerationRequest(
        key="k",
        messages=({"role": "system", "content": "s"}, {"role": "user", "content": "q"}),
        images=(b"1", b"2"),
    )
    msgs = _chat_messages(req)
    assert msgs[0] == {"role": "system", "content": [{"type": "text", "text": "s"}]}
    assert msgs[1]["content"] == [
        {"type": "image"},
        {"type": "image"},
        {"type": "text", "text": "q"},
    ]


@pytest.mark.parametrize(
    "data, fragment",
    [
        (
            {
                "targets": [{"name": "v", "backend": "llamacpp", "model": "x", "task": "vision"}],
                "vision": {"image_set": "pairs", "image_root": "."},
            },
            "vllm serve",
        ),
        (
            {"targets": [{"name": "v", "backend": "openai", "model": "x", "task": "vision"}]},
            "image_root",
        ),
        (
            {
                "targets": [{"name": "v", "backend": "openai", "model": "x", "task": "vision"}],
                "vision": {"image_set": "pairs"},
            },
            "`vision:` block",
        ),
        (
            {
                "targets": [{"name": "v", "backend": "openai", "model": "x"}],
                "vision": {"temperatures": []},
            },
            "vision.temperatures",
        ),
        (
            {
                "targets": [{"name": "v", "backend": "openai", "model": "x"}],
                "arms": [{"name": "disability_assignment"}],
            },
            "reserved",
        ),
        (
            {
                "targets": [{"name": "v", "backend": "openai", "model": "x"}],
                "arms": [{"name": "m", "vision_prompt": "x"}],
            },
            "vision_prompt",
        ),
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
    base = {
        "query_set": "pairs",
        "query_id": "status/phone/black_man",
        "domain": "status",
        "rel_path": "status/phone/black_man.png",
        "image_sha256": sha,
    }
    rows = [
        dict(
            base,
            prompt_id="p:n",
            prompt_kind="neutral",
            condition="neutral",
            disability_id=None,
            prompt_text="Describe.",
        ),
        dict(
            base,
            prompt_id="p:a",
            prompt_kind="assignment",
            condition="neutral",
            disability_id=None,
            prompt_text="Which?",
        ),
    ]
    for d in ("hearing", "vision"):
        rows.append(
            dict(
                base,
                prompt_id=f"p:d:{d}",
                prompt_kind="disability",
                condition="disability",
                disability_id=d,
                prompt_text=f"Describe. May have {d}.",
            )
        )
        rows.append(
            dict(
                base,
                prompt_id=f"p:m:{d}",
                prompt_kind="mitigation",
                condition="disability",
                disability_id=d,
                prompt_text=f"Describe. May have {d}. Be factual.",
            )
        )
    return rows


def _vision_cfg(**kw):
    vision = {"image_set": "pairs", "image_root": ".", "temperatures": [0.0, 0.5]}
    vision.update(kw.pop("vision", {}))
    data = {
        "samples": 2,
        "vision": vision,
        "arms": [{"name": "baseline"}, {"name": "mitigation", "vision_prompt": "mitigation"}],
        "targets": [{"name": "v", "backend": "openai", "model": "m", "task": "vision"}],
    }
    data.update(kw)
    return parse_config(data)


def _plan(cfg, kind, prompts, image_root=None):
    from ableaudit.audit.planning import plan_task

    return [p for plan in plan_task(cfg, kind, prompts, image_root) for p in plan.planned]


def test_vision_plan_arms_probe_and_keys(tmp_path):
    cfg = _vision_cfg(vision={"probe_disability_assignment": True})
    plan = _plan(cfg, "vision", _prompts(), tmp_path)
    by_arm: dict[str, set] = {}
    for p in plan:
        by_arm.setdefault(p.arm, set()).add(p.prompt_id)
    assert by_arm["baseline"] == {"p:n", "p:d:hearing", "p:d:vision"}
    assert by_arm["mitigation"] == {"p:n", "p:m:hearing", "p:m:vision"}
    assert by_arm["disability_assignment"] == {"p:a"}
    assert len(plan) == (3 + 3 + 1) * 2 * 2 and len({p.generation_id for p in plan}) == len(plan)
    assert {p.task for p in plan} == {"vision"} and {p.temperature for p in plan} == {0.0, 0.5}
    assert all(
        p.image_rel_path == "status/phone/black_man.png" and p.image_root == str(tmp_path.resolve())
        for p in plan
    )
    assert all(p.max_new_tokens == 512 and p.system_prompt == "" for p in plan)
    # the image's bytes are part of the key; nothing else about the plan changes with them
    other = _plan(cfg, "vision", _prompts("b" * 64), tmp_path)
    assert not {p.generation_id for p in plan} & {p.generation_id for p in other}
    again = _plan(cfg, "vision", _prompts(), tmp_path)
    assert [p.generation_id for p in again] == [p.generation_id for p in plan]
    # a target's own temperature wins over vision.temperatures
    cfg2 = _vision_cfg(
        targets=[
            {
                "name": "v",
                "backend": "openai",
                "model": "m",
                "task": "vision",
                "decoding": {"temperature": 0.3},
            }
        ]
    )
    assert {p.temperature for p in _plan(cfg2, "vision", _prompts(), tmp_path)} == {0.3}
    # without the probe, no generation of the reserved arm
    assert "disability_assignment" not in {
        p.arm for p in _plan(_vision_cfg(), "vision", _prompts(), tmp_path)
    }


def test_planned_vision_request_carries_the_image_and_the_backend_reads_it_checked(tmp_path):
    """Planning reads no file: the request carries a reference that is read (and checked) at send time."""
    import hashlib

    from ableaudit.media import ImageSetError, image_bytes
    from ableaudit.records import ImageRef

    data = _image("on-disk")
    (tmp_path / "status" / "phone").mkdir(parents=True)
    (tmp_path / "status" / "phone" / "black_man.png").write_bytes(data)
    cfg = _vision_cfg()
    plan = _plan(cfg, "vision", _prompts(hashlib.sha256(data).hexdigest()), tmp_path)
    req = plan[0].request()
    (ref,) = req.images
    assert isinstance(ref, ImageRef) and image_bytes(ref) == data
    assert req.messages == ({"role": "user", "content": plan[0].prompt_text},)
    assert (
        "image_root"
        not in __import__("ableaudit.warehouse.landing", fromlist=["x"]).GENERATION_COLUMNS
    )
    stale = _plan(cfg, "vision", _prompts("c" * 64), tmp_path)[0]
    (stale_ref,) = stale.request().images  # planning never reads the file
    with pytest.raises(ImageSetError, match="changed since it was loaded"):
        image_bytes(stale_ref)


def test_text_targets_plan_as_before():
    """A text-only config plans exactly what it planned before vision existed (same keys)."""
    cfg = parse_config(
        {"targets": [{"name": "t", "backend": "openai", "model": "m"}], "samples": 1}
    )
    prompt = {
        "prompt_id": "ableaudit:q1:neutral",
        "prompt_text": "Hello?",
        "query_set": "ableaudit",
        "query_id": "q1",
        "domain": "education",
        "disability_id": None,
        "condition": "neutral",
    }
    (p,) = _plan(cfg, "text", [prompt])
    assert p.image_rel_path is None and p.request().images == ()
    assert (
        p.system_prompt == "You are a helpful assistant."
        and p.max_new_tokens == 1048
        and p.temperature == 0.1
    )
    assert p.generation_id == "d06bbebac384bd576d24681a97749afdbf0be00109b03b8162bb8851f30f4d62"


# Keys of generations audits have landed: a config must plan them again, to the byte, or a
# re-run would generate (and pay for) what exists. Pinned as literal values, never recomputed.
_PIN_ARMS = [
    {"name": "baseline"},
    {"name": "mitigation", "vision_prompt": "mitigation"},
    {"name": "careful", "system_prompt": "Be careful.", "adapter": "org/debias-lora"},
]
_PIN_TEXT = {
    "samples": 2,
    "temperatures": [0.1, 0.7],
    "arms": _PIN_ARMS,
    "targets": [
        {"name": "t", "backend": "openai", "model": "m"},
        {
            "name": "u",
            "backend": "transformers",
            "model": "org/lm",
            "adapter": "org/base-lora",
            "model_id": "lm-x",
            "decoding": {"temperature": 0.2, "seed": None},
        },
    ],
}
_PIN_VISION = {
    "samples": 2,
    "arms": _PIN_ARMS,
    "vision": {
        "image_set": "pairs",
        "image_root": ".",
        "temperatures": [0.0, 0.5],
        "probe_disability_assignment": True,
    },
    "targets": [
        {"name": "v", "backend": "openai", "model": "m", "task": "vision"},
        {
            "name": "w",
            "backend": "transformers",
            "model": "org/vlm",
            "revision": "r1",
            "task": "vision",
            "adapter": "org/base-lora",
            "decoding": {"temperature": 0.3},
        },
    ],
}
_PIN_TEXT_PROMPTS = [
    {
        "prompt_id": "ableaudit:q1:neutral",
        "prompt_text": "Hello?",
        "query_set": "ableaudit",
        "query_id": "q1",
        "domain": "education",
        "disability_id": None,
        "condition": "neutral",
    },
    {
        "prompt_id": "ableaudit:q1:hearing",
        "prompt_text": "I am deaf. Hello?",
        "query_set": "ableaudit",
        "query_id": "q1",
        "domain": "education",
        "disability_id": "hearing",
        "condition": "disability",
    },
]


def _plan_digest(plans) -> tuple[int, str]:
    import hashlib

    rows = sorted(
        f"{plan.target.name}|{adapter}|{p.arm}|{p.prompt_id}|{p.temperature}|{p.sample_index}|{p.generation_id}"
        for plan in plans
        for adapter, planned in plan.groups
        for p in planned
    )
    return len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _first_keys(plans) -> dict[tuple, str]:
    return {
        (plan.target.name, adapter): planned[0].generation_id
        for plan in plans
        for adapter, planned in plan.groups
    }


def test_text_keys_are_pinned():
    from ableaudit.audit.planning import plan_task

    plans = plan_task(parse_config(_PIN_TEXT), "text", _PIN_TEXT_PROMPTS)
    # the vision-only mitigation arm is skipped; an arm's adapter loads in a group of its own
    assert _first_keys(plans) == {
        ("t", None): "d06bbebac384bd576d24681a97749afdbf0be00109b03b8162bb8851f30f4d62",
        (
            "t",
            "org/debias-lora",
        ): "50e557838af02fd2a8e229f38e17ca7d59c3d0c049f0a3bf8b9d0b5807ed7d14",
        ("u", "org/base-lora"): "004fea98b972fed3bc47c1c170cc6782b4c5b1dfcc7e1ae6193b01193336a7fc",
        (
            "u",
            "org/debias-lora",
        ): "830268073ec4c000365e0672de61a459ee59593954ccd9db24263229e0152b98",
    }
    assert _plan_digest(plans) == (
        24,
        "f262e6bffa811936dfe239d8d227af3c0300956e45c28581176777606d3b0172",
    )


def test_vision_keys_are_pinned():
    from ableaudit.audit.planning import plan_task

    plans = plan_task(parse_config(_PIN_VISION), "vision", _prompts(), "/tmp")
    # the probe runs in the group of the target's own adapter
    assert _first_keys(plans) == {
        ("v", None): "af87f46f4abdf26be8912d7ca84ab989058d5157f2718e86f895b11f744f5a2a",
        (
            "v",
            "org/debias-lora",
        ): "48b221f6ab1672cb64e0bf01e536a82015e08ba226cfd6c7d7fe87ecd710800f",
        ("w", "org/base-lora"): "f92e75a602f0f89a21277bdefed552502add31ffca2a1035ec0c36ac7e37fd25",
        (
            "w",
            "org/debias-lora",
        ): "cbb0782d5d083aeb22c467796d82c0d36212c61ca4e285fe2655fbc9cdbd76c1",
    }
    assert {
        (plan.target.name, a): {p.arm for p in planned}
        for plan in plans
        for a, planned in plan.groups
    } == {
        ("v", None): {"baseline", "mitigation", "disability_assignment"},
        ("v", "org/debias-lora"): {"careful"},
        ("w", "org/base-lora"): {"baseline", "mitigation", "disability_assignment"},
        ("w", "org/debias-lora"): {"careful"},
    }
    assert _plan_digest(plans) == (
        60,
        "2b74d2e2bdbe60a727e1961e17eaca877a1c26bb9b1c49a6baedef54aaba3217",
    )


def test_deprecated_vision_keys_plan_the_same_keys():
    import warnings

    from ableaudit.audit.planning import plan_task

    old = {k: v for k, v in _PIN_VISION.items() if k != "vision"}
    old.update(
        image_set="pairs",
        image_root=".",
        vision_temperatures=[0.0, 0.5],
        probe_disability_assignment=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cfg = parse_config(old)
    assert cfg.vision == parse_config(_PIN_VISION).vision
    assert _plan_digest(plan_task(cfg, "vision", _prompts(), "/tmp")) == _plan_digest(
        plan_task(parse_config(_PIN_VISION), "vision", _prompts(), "/tmp")
    )
