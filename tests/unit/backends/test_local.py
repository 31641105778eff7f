"""Backends against real (tiny) models: transformers on random-init LMs, llamacpp on SmolLM2.

The transformers tests compare the backend with plain ``model.generate`` on
the same weights, one prompt at a time: batching, sorting, padding and order
restoration must not change a single greedy token.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ableaudit.backends import BackendError, make_backend
from ableaudit.config import Target
from ableaudit.records import GenerationRequest

ROOT = Path(__file__).resolve().parents[3]

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
PROMPTS = [
    "I am a wheelchair user. Which careers would suit me in a big city with many jobs and good transport?",
    "hi",
    "As a blind person, how do I plan a trip?",
    "My daughter is autistic and starts school next month; how can I help her settle in, make friends and learn?",
    "Suggest a routine.",
    "Deaf people use captions.",
    "Recommend accessible hobbies, sports, jobs, apartments and restaurants, please, in detail.",
]


def _req(key: str, text: str, **kw) -> GenerationRequest:
    kw.setdefault("temperature", 0.0)
    kw.setdefault("max_new_tokens", 10)
    return GenerationRequest(key=key, messages=(SYSTEM, {"role": "user", "content": text}), **kw)


def _target(model: Path | str, **kw) -> Target:
    return Target(name="tiny", backend=kw.pop("backend", "transformers"), model=str(model), **kw)


def _plain_greedy(
    model_dir: Path, texts: list[str], max_new_tokens: int, adapter: Path | None = None
) -> list[list[int]]:
    """The reference: unbatched HF generate, no backend code involved."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    out = []
    for t in texts:
        prompt = tok.apply_chat_template(
            [SYSTEM, {"role": "user", "content": t}], tokenize=False, add_generation_prompt=True
        )
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt")
        with torch.inference_mode():
            g = model.generate(
                **ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
            )
        out.append(g[0, ids["input_ids"].shape[1] :].tolist())
    return out


@pytest.fixture(scope="module")
def tiny_backend(tiny_chat_model_dir):
    b = make_backend(_target(tiny_chat_model_dir, batch_size=3))
    yield b
    b.close()


# ---------------------------------------------------------------- transformers


def test_batched_greedy_equals_unbatched_hf_and_order_is_restored(
    tiny_chat_model_dir, tiny_backend
):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_chat_model_dir), local_files_only=True)
    ref = _plain_greedy(tiny_chat_model_dir, PROMPTS, 10)
    assert len({tuple(r) for r in ref}) > 2, "reference outputs should differ between prompts"
    reqs = [_req(f"k{i}", p) for i, p in enumerate(PROMPTS)]
    results = tiny_backend.generate(reqs)

    assert [r.key for r in results] == [q.key for q in reqs]
    eos = tok.eos_token_id
    for i, (res, toks) in enumerate(zip(results, ref)):
        body = toks[: toks.index(eos)] if eos in toks else toks
        assert res.status in ("ok", "empty"), res
        assert res.text == tok.decode(body, skip_special_tokens=True), (
            f"prompt {i} got another prompt's output"
        )
        prompt = tok.apply_chat_template(
            [SYSTEM, {"role": "user", "content": PROMPTS[i]}],
            tokenize=False,
            add_generation_prompt=True,
        )
        assert res.prompt_tokens == len(tok(prompt, add_special_tokens=False)["input_ids"])
        assert res.finish_reason == ("stop" if eos in toks else "length")
        assert res.completion_tokens == (len(body) + 1 if eos in toks else 10)
        assert res.latency_ms is not None and res.latency_ms > 0
        assert res.model_revision == tiny_backend.model_revision  # the loaded checkpoint answered
    # prompt lengths are all different, so a mix-up after sorting would show here too
    assert len({r.prompt_tokens for r in results}) == len(PROMPTS)


def test_qwen2_architecture_batched_equals_unbatched(tiny_qwen2_model_dir):
    b = make_backend(_target(tiny_qwen2_model_dir, batch_size=4))
    try:
        batched = b.generate([_req(f"q{i}", p) for i, p in enumerate(PROMPTS)])
        single = [b.generate([_req(f"q{i}", p)])[0] for i, p in enumerate(PROMPTS)]
    finally:
        b.close()
    assert [r.text for r in batched] == [r.text for r in single]
    assert [r.completion_tokens for r in batched] == [r.completion_tokens for r in single]


def test_finish_reasons_in_a_mixed_batch(tiny_chat_model_dir, tiny_backend):
    """Rows that hit EOS mid-batch stop there ('stop'); the others run to max_new_tokens ('length')."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_chat_model_dir), local_files_only=True)
    model, eos, pad = tiny_backend.model, tok.eos_token_id, tok.pad_token_id
    short, long_ = "hi", PROMPTS[0]
    limit = (
        len(
            tok(
                tok.apply_chat_template(
                    [SYSTEM, {"role": "user", "content": short}],
                    tokenize=False,
                    add_generation_prompt=True,
                ),
                add_special_tokens=False,
            )["input_ids"]
        )
        + 1
    )
    state: dict = {}

    def on_embed(_mod, args):  # prefill sees the whole prompt, decode steps one token
        ids = args[0]
        if ids.shape[1] > 1:
            state.update(step=0, stop_rows=(ids != pad).sum(1) < limit)
        else:
            state["step"] += 1

    def on_head(_mod, _args, out):
        if state["step"] >= 2:  # the 3rd generated token of short prompts is forced to EOS
            out[state["stop_rows"], -1, eos] = 1e4
        return out

    base = {
        r.key: r
        for r in tiny_backend.generate(
            [_req("s", short, max_new_tokens=8), _req("l", long_, max_new_tokens=8)]
        )
    }
    assert base["s"].completion_tokens == 8 and base["l"].completion_tokens == 8, (
        "random model stopped by itself"
    )
    h1 = model.model.embed_tokens.register_forward_pre_hook(on_embed)
    h2 = model.lm_head.register_forward_hook(on_head)
    try:
        res = tiny_backend.generate(
            [
                _req("l", long_, max_new_tokens=8),
                _req("s", short, max_new_tokens=8),
                _req("s2", short, max_new_tokens=2),
            ]
        )
    finally:
        h1.remove()
        h2.remove()
    by = {r.key: r for r in res}
    assert (by["s"].finish_reason, by["s"].completion_tokens) == ("stop", 3)  # 2 tokens + EOS
    assert by["s"].text == tokenize_prefix(tok, base["s"].text, 2)
    assert (by["l"].finish_reason, by["l"].completion_tokens, by["l"].text) == (
        "length",
        8,
        base["l"].text,
    )
    assert (by["s2"].finish_reason, by["s2"].completion_tokens) == ("length", 2)


def tokenize_prefix(tok, text: str, n: int) -> str:
    """The text of the first n tokens of ``text`` (byte-level BPE round-trips exactly)."""
    return tok.decode(tok(text, add_special_tokens=False)["input_ids"][:n])


def test_sampling_is_seeded_per_request(tiny_chat_model_dir, tiny_backend):
    p = PROMPTS[2]
    reqs = [
        _req("a", p, temperature=1.0, seed=1, max_new_tokens=12),
        _req("greedy", p, max_new_tokens=12),
        _req("b", p, temperature=1.0, seed=1, max_new_tokens=12),
        _req("c", p, temperature=1.0, seed=2, max_new_tokens=12),
        _req("nucleus", p, temperature=1.0, top_p=1e-9, seed=5, max_new_tokens=12),
    ]
    first = {r.key: r.text for r in tiny_backend.generate(reqs)}
    again = {r.key: r.text for r in tiny_backend.generate(reqs)}
    greedy_alone = tiny_backend.generate([_req("g", p, max_new_tokens=12)])[0].text

    assert first == again  # same requests, same batches -> same text
    assert first["a"] == first["b"]  # same seed -> same stream, even side by side in one batch
    assert first["a"] != first["c"]  # another seed -> another sample
    assert first["greedy"] == greedy_alone  # a greedy row is untouched by sampled neighbours
    assert first["nucleus"] == greedy_alone  # top_p -> only the argmax survives
    assert first["a"] != greedy_alone
    # Across batch compositions: holds on this model/CPU; the docstring explains why it is not guaranteed.
    solo = make_backend(_target(tiny_chat_model_dir, batch_size=1))
    assert solo.generate([reqs[0]])[0].text == first["a"]


@pytest.mark.parametrize(
    "temperature, top_p, expected",
    [
        (1.0, 1.0, [0.5, 0.3, 0.2, 0.0]),
        (0.5, 1.0, [0.25 / 0.38, 0.09 / 0.38, 0.04 / 0.38, 0.0]),  # p ** (1 / T), renormalised
        (1.0, 0.6, [0.625, 0.375, 0.0, 0.0]),  # smallest prefix with mass >= 0.6
    ],
)
def test_row_sampler_draws_from_the_right_distribution(temperature, top_p, expected):
    import math

    import torch

    from ableaudit.backends.transformers_backend import _RowSampler

    n = 4000
    logits = torch.tensor([[math.log(0.5), math.log(0.3), math.log(0.2), float("-inf")]]).repeat(
        n, 1
    )
    out = _RowSampler([temperature] * n, [top_p] * n, list(range(n)))(None, logits)
    picked = out.argmax(-1)
    assert torch.isinf(out).sum(-1).eq(3).all()  # one-hot: greedy must take the drawn token
    freq = torch.bincount(picked, minlength=4).float() / n
    assert freq[3] == 0
    assert torch.allclose(freq, torch.tensor(expected), atol=0.03), freq
    again = _RowSampler([temperature] * n, [top_p] * n, list(range(n)))(None, logits).argmax(-1)
    assert torch.equal(picked, again)  # seeded


def test_adapter_is_applied(tiny_chat_model_dir, tiny_lora_adapter_dir, tiny_backend):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_chat_model_dir), local_files_only=True)
    prompts = PROMPTS[:4]
    b = make_backend(_target(tiny_chat_model_dir, batch_size=4), adapter=str(tiny_lora_adapter_dir))
    try:
        with_adapter = [
            r.text for r in b.generate([_req(f"a{i}", p) for i, p in enumerate(prompts)])
        ]
        assert (
            "+adapter:" in b.model_revision
            and str(tiny_lora_adapter_dir.resolve()) in b.model_revision
        )
    finally:
        b.close()
    base = [
        r.text for r in tiny_backend.generate([_req(f"b{i}", p) for i, p in enumerate(prompts)])
    ]
    ref = _plain_greedy(tiny_chat_model_dir, prompts, 10, adapter=tiny_lora_adapter_dir)
    eos = tok.eos_token_id
    assert with_adapter == [
        tok.decode(t[: t.index(eos)] if eos in t else t, skip_special_tokens=True) for t in ref
    ]
    assert with_adapter != base


def test_adapter_from_target_field(tiny_chat_model_dir, tiny_lora_adapter_dir):
    b = make_backend(_target(tiny_chat_model_dir, adapter=str(tiny_lora_adapter_dir)))
    assert "+adapter:" in b.model_revision
    b.close()


def test_bad_request_is_an_error_result_not_an_exception(tiny_backend):
    res = tiny_backend.generate(
        [
            _req("ok1", "hi"),
            _req("img", "look", images=(b"\x89PNG\r\n\x1a\n....",)),
            _req("ok2", "Deaf people use captions."),
        ]
    )
    assert [r.key for r in res] == ["ok1", "img", "ok2"]
    assert res[1].status == "error" and "text-only" in res[1].error
    assert res[0].status != "error" and res[2].status != "error"
    assert tiny_backend.generate([]) == []


def test_failed_batch_is_retried_one_by_one(tiny_backend, monkeypatch):
    """A batch that raises (OOM, one poisoned prompt) costs only the requests that fail alone."""
    real = tiny_backend._run_batch

    def flaky(items):
        if len(items) > 1:
            raise RuntimeError("CUDA out of memory (simulated)")
        if items[0][1].key == "poison":
            raise ValueError("poisoned prompt")
        return real(items)

    monkeypatch.setattr(tiny_backend, "_run_batch", flaky)
    res = tiny_backend.generate(
        [_req("a", "hi"), _req("poison", "hello"), _req("b", "Suggest a routine.")]
    )
    assert [(r.key, r.status) for r in res] == [("a", "ok"), ("poison", "error"), ("b", "ok")]
    assert res[1].error == "ValueError: poisoned prompt"


def test_model_revision_pins_the_directory(tiny_chat_model_dir, tiny_backend, tmp_path):
    import shutil

    from ableaudit.backends._common import dir_fingerprint

    assert (
        tiny_backend.model_revision
        == f"{tiny_chat_model_dir.resolve()}#{dir_fingerprint(tiny_chat_model_dir)}"
    )
    copy = tmp_path / "m"
    shutil.copytree(tiny_chat_model_dir, copy)
    assert dir_fingerprint(copy) == dir_fingerprint(tiny_chat_model_dir)
    cfg = copy / "config.json"
    cfg.write_text(cfg.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 1'))
    assert dir_fingerprint(copy) != dir_fingerprint(tiny_chat_model_dir)


def test_missing_models_fail_fast_with_a_fix(monkeypatch, tiny_chat_model_dir):
    monkeypatch.delenv("ABLEAUDIT_ALLOW_DOWNLOAD", raising=False)
    with pytest.raises(BackendError, match="does not exist"):
        make_backend(_target("/nonexistent/model-dir"))
    t0 = time.perf_counter()
    with pytest.raises(BackendError, match="ABLEAUDIT_ALLOW_DOWNLOAD"):
        make_backend(_target("ableaudit-test/surely-not-cached-model"))
    assert time.perf_counter() - t0 < 15
    with pytest.raises(BackendError, match="adapter"):
        make_backend(_target(tiny_chat_model_dir), adapter="/nonexistent/adapter")
    with pytest.raises(BackendError, match="dtype"):
        make_backend(_target(tiny_chat_model_dir, options={"dtype": "float8"}))


# ---------------------------------------------------------------- llamacpp (real SmolLM2 GGUF)


@pytest.fixture(scope="module")
def smol():
    b = make_backend(
        Target(
            name="smol",
            backend="llamacpp",
            model="builtin:smollm2",
            options={"n_ctx": 512, "n_threads": 2, "n_parallel": 2},
        )
    )
    yield b
    b.close()


def test_llamacpp_builtin_smollm2(smol):
    m = lambda u: (
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": u},
    )  # noqa: E731
    reqs = [
        GenerationRequest(
            key="yes",
            messages=m("Reply with the single word: yes"),
            temperature=0.0,
            max_new_tokens=16,
        ),
        GenerationRequest(
            key="long", messages=m("word " * 700), temperature=0.0, max_new_tokens=16
        ),
        GenerationRequest(
            key="poem",
            messages=m("Write a long poem about the sea."),
            temperature=0.0,
            max_new_tokens=4,
        ),
        GenerationRequest(
            key="s1", messages=m("Tell a story."), temperature=0.9, seed=7, max_new_tokens=12
        ),
        GenerationRequest(
            key="s2", messages=m("Tell a story."), temperature=0.9, seed=7, max_new_tokens=12
        ),
        GenerationRequest(
            key="s3", messages=m("Tell a story."), temperature=0.9, seed=8, max_new_tokens=12
        ),
    ]
    res = {r.key: r for r in smol.generate(reqs)}
    assert list(res) == [r.key for r in reqs]
    assert res["yes"].status == "ok" and "yes" in res["yes"].text.lower()
    assert res["yes"].finish_reason == "stop" and 0 < res["yes"].completion_tokens < 16
    assert res["yes"].prompt_tokens > 10
    assert res["long"].status == "error" and "context" in res["long"].error  # prompt > n_ctx
    assert (res["poem"].finish_reason, res["poem"].completion_tokens) == ("length", 4)
    assert res["s1"].text == res["s2"].text != res["s3"].text
    assert smol.model_revision.startswith("SmolLM2-135M-Instruct.Q4_1.gguf@sha256:")
    # every answered result names the GGUF digest; an error names nothing (nothing answered)
    assert {r.model_revision for k, r in res.items() if k != "long"} == {smol.model_revision}
    assert res["long"].model_revision is None
    # greedy is deterministic
    assert smol.generate([reqs[0]])[0].text == res["yes"].text


def test_llamacpp_constrains_output_to_a_json_schema(smol):
    """A request's json_schema becomes a llama.cpp grammar: the reply is that JSON, whatever the prompt says."""
    import json

    import jsonschema

    schema = {
        "type": "object",
        "properties": {"colour": {"enum": ["teal", "ochre"]}, "n": {"type": "integer"}},
        "required": ["colour", "n"],
        "additionalProperties": False,
    }
    m = ({"role": "user", "content": "Say hello and tell me a joke."},)
    free, constrained = smol.generate(
        [
            GenerationRequest(key="free", messages=m, temperature=0.0, max_new_tokens=24),
            GenerationRequest(
                key="json", messages=m, temperature=0.0, max_new_tokens=64, json_schema=schema
            ),
        ]
    )
    with pytest.raises((ValueError, jsonschema.ValidationError)):
        jsonschema.validate(
            json.loads(free.text), schema
        )  # unconstrained SmolLM2 does not answer in that JSON
    assert constrained.status == "ok" and constrained.finish_reason == "stop"
    jsonschema.validate(json.loads(constrained.text), schema)
    assert smol._payload(GenerationRequest(key="k", messages=m, json_schema=schema))[
        "response_format"
    ] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": schema, "strict": False},
    }
    assert "response_format" not in smol._payload(GenerationRequest(key="k", messages=m))


def test_backends_without_structured_output_fail_such_requests(tiny_backend):
    res = tiny_backend.generate([_req("s", "hi", json_schema={"type": "object"}), _req("f", "hi")])
    assert res[0].status == "error" and "cannot constrain output to a JSON schema" in res[0].error
    assert res[1].status != "error"


def test_llamacpp_errors():
    with pytest.raises(BackendError, match="does not exist"):
        make_backend(Target(name="x", backend="llamacpp", model="/nope/model.gguf"))
    with pytest.raises(BackendError, match="builtin:smollm2"):
        make_backend(Target(name="x", backend="llamacpp", model="builtin:nosuch"))
    with pytest.raises(BackendError, match="adapter"):
        make_backend(
            Target(name="x", backend="llamacpp", model="builtin:smollm2"), adapter="/some/lora"
        )


# ---------------------------------------------------------------- dispatch


def test_make_backend_dispatch_and_unknown():
    t = Target.model_construct(name="x", backend="tgi", model="m", options={})
    with pytest.raises(
        BackendError,
        match="unknown backend 'tgi'; the registered backends are llamacpp, openai, "
        "transformers, vllm",
    ):
        make_backend(t)


def test_openai_and_vllm_backends_do_not_import_torch(tmp_path):
    code = (
        "import sys, os\n"
        "os.environ['ABLEAUDIT_VLLM_PYTHON'] = sys.executable\n"
        "from ableaudit.config import Target\n"
        "from ableaudit.backends import make_backend\n"
        "b = make_backend(Target(name='o', backend='openai', model='m', base_url='http://127.0.0.1:9/v1',"
        " options={'check_server': False}))\n"
        "v = make_backend(Target(name='v', backend='vllm', model='m'))\n"
        "print(b.name, v.name, 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["openai", "vllm", "False", "False"]
