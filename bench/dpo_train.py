"""DPO training timed: a LoRA on exported preference pairs, or a size check on a random-init model.

A random-init Qwen2 of a real architecture (``--random-init``: the layer shapes of
Qwen2.5 0.5B to 7B, random weights, a word-level chat tokenizer) and synthetic pairs
(``--synthetic N``) need no download, so the check runs on a bare GPU machine. The
adapter is trained and registered by ``ableaudit.adapters.dpo.train.train_dpo``, as an
audit's DPO step does; this prints its load and training time, steps per second,
first and last loss and, on CUDA, the peak memory.

    .venv/bin/python bench/dpo_train.py --model builtin:smollm2 --synthetic 64 --max-steps 4
    .venv/bin/python bench/dpo_train.py --random-init qwen2.5-0.5b --synthetic 64 --device cuda
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ableaudit.adapters.dpo.train import DPOTrainConfig, train_dpo

# Random-init architectures for a size check without any download: the real layer shapes, random weights.
ARCHS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
    ),
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        rope_theta=1000000.0,
        tie_word_embeddings=True,
    ),
    "qwen2.5-1.5b": dict(
        hidden_size=1536,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        intermediate_size=8960,
        rope_theta=1000000.0,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        hidden_size=3584,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        intermediate_size=18944,
        rope_theta=1000000.0,
        tie_word_embeddings=False,
    ),
}
_SYNTH_WORDS = (
    "you can compare the fees of several banks and ask for accessible statements plan your budget with "
    "a list of options talk with an advisor about savings goals screen readers captions large print "
    "support people who struggle despite their condition brave inspiring suffers confined"
).split()


def build_random_causal_lm(
    out_dir: str | os.PathLike, arch: str = "tiny", vocab_size: int = 151936
) -> str:
    """A random-init Qwen2 causal LM of a real architecture with a word-level chat tokenizer (no download)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_end|>", "<|system|>", "<|user|>", "<|assistant|>", "[UNK]"]
    names = (
        specials
        + sorted(set(_SYNTH_WORDS))
        + ["You", "are", "a", "helpful", "assistant.", "?", "."]
    )
    vocab = {w: i for i, w in enumerate(dict.fromkeys(names))}
    vocab_size = max(vocab_size if arch != "tiny" else 512, len(vocab))
    vocab.update({f"w{i}": i for i in range(len(vocab), vocab_size)})
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|im_end|> {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|> {% endif %}"
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="[UNK]",
        chat_template=template,
    )
    tok.save_pretrained(str(out))
    cfg = Qwen2Config(
        vocab_size=vocab_size,
        max_position_embeddings=4096,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.pad_token_id,
        **ARCHS[arch],
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(str(out))
    return str(out)


def synthetic_preferences(out_dir: str | os.PathLike, n: int, seed: int = 0) -> Path:
    """n preference pairs in the export's layout (train.jsonl), answers of 60-200 words."""
    import random

    rng = random.Random(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def answer(k: int) -> str:
        return " ".join(rng.choice(_SYNTH_WORDS) for _ in range(k))

    with (out / "train.jsonl").open("w") as f:
        for i in range(n):
            f.write(
                json.dumps(
                    {
                        "prompt": [
                            {"role": "system", "content": "You are a helpful assistant."},
                            {
                                "role": "user",
                                "content": f"plan your budget as a person who uses screen readers ? {i}",
                            },
                        ],
                        "chosen": [{"role": "assistant", "content": answer(rng.randint(60, 200))}],
                        "rejected": [
                            {
                                "role": "assistant",
                                "content": answer(rng.randint(60, 200)) + " suffers despite",
                            }
                        ],
                    }
                )
                + "\n"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    """DPO on exported data, or a size check on a random-init model; print the timings."""
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(
        description="DPO-train a LoRA adapter with TRL and register it; print timings"
    )
    ap.add_argument(
        "--warehouse",
        help="where the adapter is registered (default: $ABLEAUDIT_WAREHOUSE or the default)",
    )
    ap.add_argument("--model", help="HF id, local folder or builtin:smollm2")
    ap.add_argument(
        "--random-init",
        choices=sorted(ARCHS),
        help="instead of --model: a random-init Qwen2 of this size (a size check: the base is deleted after)",
    )
    ap.add_argument(
        "--data",
        help="an export folder (ableaudit export preference-pairs) or a train.jsonl/.parquet",
    )
    ap.add_argument(
        "--synthetic", type=int, help="instead of --data: this many synthetic preference pairs"
    )
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--learning-rate", type=float, default=5e-5)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--name", default="dpo")
    ap.add_argument("--adapters-root")
    args = ap.parse_args(argv)
    if bool(args.model) == bool(args.random_init) or bool(args.data) == bool(args.synthetic):
        ap.error("pass exactly one of --model / --random-init and one of --data / --synthetic")
    with tempfile.TemporaryDirectory(prefix="ableaudit-dpo-") as tmp:
        t = time.perf_counter()
        model = args.model or build_random_causal_lm(Path(tmp) / "model", args.random_init)
        built = round(time.perf_counter() - t, 1)
        data = args.data or str(synthetic_preferences(Path(tmp) / "data", args.synthetic))
        cfg = DPOTrainConfig(
            model=model,
            data=data,
            name=args.name,
            max_steps=args.max_steps,
            batch_size=args.batch_size,
            max_length=args.max_length,
            lora_r=args.lora_r,
            lora_alpha=2 * args.lora_r,
            learning_rate=args.learning_rate,
            device=args.device,
            dtype=args.dtype,
            gradient_checkpointing=args.gradient_checkpointing,
            adapters_root=args.adapters_root,
        )
        res = train_dpo(args.warehouse, cfg)
        import torch

        n_params = None
        if args.random_init:
            from transformers import AutoConfig

            c = AutoConfig.from_pretrained(model)
            n_params = f"{args.random_init} ({c.num_hidden_layers} layers, hidden {c.hidden_size})"
        m = res.metrics
        print(res.summary())
        print(
            f"model: {n_params or args.model}; built in {built}s; device {m['device']} {m['dtype']}"
            + (
                f" ({torch.cuda.get_device_name(0)}, peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB)"
                if m["device"].startswith("cuda")
                else ""
            )
        )
        print(
            f"timings: load {res.timings['load_seconds']}s, train {res.timings['train_seconds']}s for {m['steps']} "
            f"steps ({m['steps_per_second']} steps/s, batch {args.batch_size}, max_length {args.max_length}); "
            f"loss {m['first_loss']} -> {m['last_loss']}"
        )
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
