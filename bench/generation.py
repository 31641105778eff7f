"""Throughput of the transformers backend against plain Hugging Face ``generate``.

Why: the backend adds work around ``model.generate`` (chat templating,
length-sorting, padding, per-row sampling, decoding, result objects). This
shows what that costs, and what batching buys, on the same model, prompts and
device:

  plain HF generate (1 at a time)  -- the baseline: one prompt per generate call
  plain HF generate (batched)      -- prompts in the given order, chunks of --batch, left padding
  ableaudit transformers backend   -- the backend with batch_size=--batch

All three decode greedily and generate exactly --max-new-tokens tokens per
prompt (min_new_tokens = max_new_tokens; the backend's ``ignore_eos`` option),
so a random model's accidental EOS cannot make one side do less work. Each
method runs --repeat rounds (order rotated) and the fastest round counts, so a
busy shared machine disturbs the ratios less.

Without --model it builds a random-init model of the architecture ``--shape``
names from a config dict, offline, with a word-level tokenizer of the same
vocabulary size: ``qwen2.5-0.5b`` (hidden 896, 24 layers, 14 heads, 2 KV heads,
intermediate 4864, vocab 151936; the default), ``qwen2.5-7b`` (hidden 3584, 28
layers, 28 heads, 4 KV heads, intermediate 18944, vocab 152064) or ``small``
(``--small``: the layers scaled down for CPU runs; the vocabulary, and so the
LM-head cost, stays the same). The weights are initialised on the device in the
bench's dtype and handed to the backend as its load (a 7B checkpoint is not
written to disk and read back); the tokenizer and config are real files.
``--batches 64,256`` measures several batch sizes with one model (the
1-at-a-time baseline once), ``--json`` writes every figure to a file.

    .venv/bin/python bench/generation.py --small --n-prompts 16 --batch 8 --max-new-tokens 16 --device cpu --threads 1
    .venv/bin/python bench/generation.py --device cuda --batch 32 --n-prompts 256 --max-new-tokens 128 --baseline-prompts 16 --repeat 2
    .venv/bin/python bench/generation.py --model /models/Qwen2.5-0.5B-Instruct --device cuda
    python bench/generation.py --shape qwen2.5-7b --device cuda --batches 64,256 --n-prompts 256 \
        --max-new-tokens 64 --baseline-prompts 4 --repeat 1 --json /tmp/generation-7b.json
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QWEN25_05B = dict(
    hidden_size=896,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    intermediate_size=4864,
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
SMALL = dict(
    QWEN25_05B, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1376
)  # head_dim 64, GQA 2:1 as in the original
QWEN25_7B = dict(
    hidden_size=3584,
    num_hidden_layers=28,
    num_attention_heads=28,
    num_key_value_heads=4,
    intermediate_size=18944,
    vocab_size=152064,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
)
SHAPES = {"qwen2.5-0.5b": QWEN25_05B, "qwen2.5-7b": QWEN25_7B, "small": SMALL}

_WORDS = (
    "I am a wheelchair user and I want to know which careers hobbies apartments and cities would suit me "
    "my daughter is autistic and starts school next month how can I help her make friends and learn "
    "as a blind person how do I plan a trip to a new city with public transport"
).split()
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def build_random_model(out_dir: Path, shape: str, dtype: str, device: str) -> Any:
    """A random-init Qwen2 model of ``shape``, built on ``device`` in ``dtype``, with its word-level
    tokenizer and config saved to out_dir (no download); returns the model (weights not saved)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    cfg = dict(SHAPES[shape])
    specials = ["<|endoftext|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "[UNK]"]
    names = specials + sorted(set(_WORDS)) + ["You", "are", "helpful", "assistant."]
    vocab = {w: i for i, w in enumerate(names)}
    vocab.update({f"w{i}": i for i in range(len(vocab), cfg["vocab_size"])})
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|end|>",
        pad_token="<|endoftext|>",
        unk_token="[UNK]",
        chat_template=CHAT_TEMPLATE,
    )
    tok.save_pretrained(str(out_dir))
    config = Qwen2Config(
        **cfg,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(config, dtype=getattr(torch, dtype))
    model.config.save_pretrained(str(out_dir))
    model.generation_config.save_pretrained(str(out_dir))
    return model.eval()


def prebuilt(folder: str, model: Any) -> Any:
    """A context in which ``from_pretrained`` of the random model's folder returns the model built
    in memory (any other reference loads as usual)."""
    from unittest import mock

    from transformers import AutoModelForCausalLM

    real = AutoModelForCausalLM.from_pretrained

    def from_pretrained(ref: Any, *args: Any, **kwargs: Any) -> Any:
        return model if str(ref) == folder else real(ref, *args, **kwargs)

    return mock.patch.object(AutoModelForCausalLM, "from_pretrained", from_pretrained)


def make_prompts(n: int) -> list[str]:
    """Prompts of varied length (8 to ~60 words), as an audit's would be."""
    out = []
    for i in range(n):
        k = 8 + (i * 13) % 53
        out.append(" ".join(_WORDS[(i + j) % len(_WORDS)] for j in range(k)) + " ?")
    return out


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def plain_generate(
    model: Any, tok: Any, prompts: list[str], batch: int, max_new: int, device: str
) -> tuple[float, int, list]:
    """Plain HF generate in the prompts' order; returns (seconds, generated tokens, token lists)."""
    import torch

    texts = [
        tok.apply_chat_template(
            [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": p},
            ],
            tokenize=False,
            add_generation_prompt=True,
        )
        for p in prompts
    ]
    tok.padding_side = "left"
    outs: list = []
    n_tokens = 0
    _sync(device)
    t0 = time.perf_counter()
    for i in range(0, len(texts), batch):
        enc = tok(
            texts[i : i + batch], return_tensors="pt", padding=True, add_special_tokens=False
        ).to(device)
        with torch.inference_mode():
            g = model.generate(
                **enc,
                max_new_tokens=max_new,
                min_new_tokens=max_new,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
            )
        new = g[:, enc["input_ids"].shape[1] :]
        n_tokens += new.numel()
        outs += new.tolist()
    _sync(device)
    return time.perf_counter() - t0, n_tokens, outs


def backend_generate(
    backend: Any, prompts: list[str], max_new: int, device: str
) -> tuple[float, int, list]:
    from ableaudit.records import GenerationRequest

    reqs = [
        GenerationRequest(
            key=str(i),
            messages=(
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": p},
            ),
            temperature=0.0,
            max_new_tokens=max_new,
        )
        for i, p in enumerate(prompts)
    ]
    _sync(device)
    t0 = time.perf_counter()
    res = backend.generate(reqs)
    _sync(device)
    dt = time.perf_counter() - t0
    bad = [r for r in res if r.status == "error"]
    if bad:
        raise SystemExit(f"backend errors: {bad[0].error}")
    return dt, sum(r.completion_tokens for r in res), [r.text for r in res]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model",
        help="local path or cached HF id (default: a random-init model of --shape)",
    )
    ap.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        default="qwen2.5-0.5b",
        help="architecture of the random-init model",
    )
    ap.add_argument("--small", action="store_true", help="--shape small (for CPU runs)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument(
        "--batches",
        default=None,
        help="comma-separated batch sizes measured with one model (default: --batch)",
    )
    ap.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    ap.add_argument("--n-prompts", type=int, default=32)
    ap.add_argument(
        "--baseline-prompts",
        type=int,
        default=None,
        help="the 1-at-a-time baseline runs on the first N prompts only (its rate does not depend on N; "
        "a GPU decodes one sequence slowly, so keep N small there); default: all",
    )
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: torch's choice); 1 is steadiest on a shared box",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds per method; the best (minimum) time is reported",
    )
    ap.add_argument(
        "--dtype",
        default=None,
        help="float32 | bfloat16 | float16 (default: float32 on CPU, bfloat16 on GPU)",
    )
    args = ap.parse_args(argv)

    import torch

    from ableaudit.backends.transformers_backend import TransformersBackend
    from ableaudit.config import Target

    if args.threads:
        torch.set_num_threads(args.threads)
    device = (
        ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    )
    dtype = args.dtype or ("float32" if device == "cpu" else "bfloat16")
    shape = "small" if args.small else args.shape
    batches = [int(b) for b in (args.batches or str(args.batch)).split(",") if b.strip()]
    tmp = None
    model_ref = args.model
    built = None
    if model_ref is None:
        tmp = tempfile.TemporaryDirectory(prefix="ableaudit-bench-")
        t0 = time.perf_counter()
        built = build_random_model(Path(tmp.name), shape, dtype, device)
        model_ref = tmp.name
        print(
            f"built random {shape}-architecture model on {device} in "
            f"{time.perf_counter() - t0:.1f}s",
            file=sys.stderr,
        )

    target = Target(
        name="bench",
        backend="transformers",
        model=model_ref,
        batch_size=batches[0],
        options={"device": device, "dtype": dtype, "ignore_eos": True},
    )
    if built is not None:
        with prebuilt(model_ref, built):
            backend = TransformersBackend(target)
    else:
        backend = TransformersBackend(target)
    built = None
    model, tok = (
        backend.model,
        backend.tokenizer,
    )  # the same weights on the same device for every row
    n_params = sum(p.numel() for p in model.parameters())
    prompts = make_prompts(args.n_prompts)

    # warm-up (kernels, allocator) so the first measured row is not penalised
    plain_generate(model, tok, prompts[:2], 2, 2, device)
    backend_generate(backend, prompts[:2], 2, device)

    n_base = (
        len(prompts)
        if args.baseline_prompts is None
        else max(1, min(args.baseline_prompts, len(prompts)))
    )

    def run_backend(b: int) -> tuple[float, int, list]:
        backend.batch_size = backend.concurrency = b
        return backend_generate(backend, prompts, args.max_new_tokens, device)

    methods = [
        (
            "plain HF generate (1 at a time)",
            1,
            lambda: plain_generate(model, tok, prompts[:n_base], 1, args.max_new_tokens, device),
        )
    ]
    for b in batches:
        methods += [
            (
                "plain HF generate (batched)",
                b,
                lambda b=b: plain_generate(model, tok, prompts, b, args.max_new_tokens, device),
            ),
            ("ableaudit transformers backend", b, lambda b=b: run_backend(b)),
        ]
    # Best of --repeat, rotating the order each round: on a shared machine the
    # minimum is the least-disturbed run, and rotation spreads drift over all rows.
    best: dict[int, tuple[float, int, list]] = {}
    for rep in range(args.repeat):
        for k in range(len(methods)):
            i = (k + rep) % len(methods)
            t, n, out = methods[i][2]()
            if i not in best or t < best[i][0]:
                best[i] = (t, n, out)
    rows = [(name, b, best[i][0], best[i][1]) for i, (name, b, _) in enumerate(methods)]
    backend_rows = [i for i, (name, _, _) in enumerate(methods) if name.startswith("ableaudit")]
    same = {
        methods[i][1]: sum(
            tok.decode(o, skip_special_tokens=True) == x
            for o, x in zip(best[0][2], best[i][2][:n_base])
        )
        for i in backend_rows
    }

    print(
        f"model: {model_ref if args.model else 'random ' + shape + ' arch'} "
        f"({n_params / 1e6:.1f}M params, {dtype}, {device}); prompts: {len(prompts)}, "
        f"max_new_tokens: {args.max_new_tokens}, torch threads: {torch.get_num_threads()}, best of {args.repeat}"
        + (f"; the 1-at-a-time baseline on the first {n_base}" if n_base < len(prompts) else "")
    )
    base_tps = rows[0][3] / rows[0][2]
    print(
        f"{'method':34} {'batch':>5} {'wall s':>8} {'tokens':>7} {'tok/s':>9} {'vs baseline':>11}"
    )
    for name, b, t, n in rows:
        print(f"{name:34} {b:>5} {t:>8.2f} {n:>7} {n / t:>9.1f} {n / t / base_tps:>10.2f}x")
    plain_at = {
        b: i for i, (name, b, _) in enumerate(methods) if name.startswith("plain HF generate (b")
    }
    for i in backend_rows:
        b = methods[i][1]
        j = plain_at[b]
        print(
            f"batch {b}: backend / plain batched generate "
            f"{(rows[i][3] / rows[i][2]) / (rows[j][3] / rows[j][2]):.2f}x; backend text identical "
            f"to 1-at-a-time greedy: {same[b]}/{n_base}"
        )
    if args.json:
        figures = {
            "model": args.model or f"random {shape}",
            "params_m": n_params / 1e6,
            "dtype": dtype,
            "device": device,
            "prompts": len(prompts),
            "max_new_tokens": args.max_new_tokens,
            "baseline_prompts": n_base,
            "rows": [
                {"method": name, "batch": b, "seconds": t, "tokens": n, "tokens_per_s": n / t}
                for name, b, t, n in rows
            ],
            "backend_vs_plain_batched": {
                str(methods[i][1]): (rows[i][3] / rows[i][2])
                / (rows[plain_at[methods[i][1]]][3] / rows[plain_at[methods[i][1]]][2])
                for i in backend_rows
            },
            "identical_to_greedy": {str(b): v for b, v in same.items()},
        }
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    backend.close()
    model = None  # frees the baseline model before the backend loads its own
    gc.collect()
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
