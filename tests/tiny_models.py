"""Tiny, offline, random-init chat models for tests.

The backends must be tested against a real tokenizer + chat template + causal
LM, but nothing may be downloaded and the whole suite must run on two CPU
cores. So we train a ~500-token byte-level BPE on a few sentences, give it a
Jinja chat template, and pair it with a 2-layer, 32-wide random model. The
outputs are gibberish, which is fine: the tests compare the backend with plain
``model.generate`` on the same weights, not with expected prose.

Use the builders directly (they take an output directory) or, from a test
module, import the session fixtures so they are built once per run::

    from tiny_models import tiny_chat_model_dir, tiny_lora_adapter_dir  # noqa: F401

Fixtures (all ``scope="session"``, each returning a ``pathlib.Path``):

* ``tiny_chat_model_dir``   -- Llama architecture, tokenizer and chat template in the same dir.
* ``tiny_qwen2_model_dir``  -- the same with the Qwen2 architecture (q/k/v biases, another code path).
* ``tiny_lora_adapter_dir`` -- a peft LoRA adapter (q_proj, v_proj) for ``tiny_chat_model_dir``,
  initialised with non-zero B so it really changes the outputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# The special tokens double as the chat template's role markers, so the
# template cannot be split into odd BPE pieces by the tiny vocabulary.
PAD, BOS, EOS = "<|pad|>", "<|bos|>", "<|eos|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = [PAD, BOS, EOS, *ROLE_TOKENS]

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

_CORPUS = [
    "You are a helpful assistant.",
    "Answer the question about disability, accessibility and inclusion.",
    "I am a wheelchair user. Which careers would suit me?",
    "My daughter is autistic and starts school next month; how can I help her?",
    "As a blind person, how do I plan a trip to a new city?",
    "I have a chronic illness and work from home. Suggest a daily routine.",
    "The quick brown fox jumps over the lazy dog while the band plays jazz.",
    "Numbers like 0 1 2 3 4 5 6 7 8 9 10 100 2024 appear in text, too.",
    "Deaf and hard-of-hearing people use sign language, captions and hearing aids.",
    "Recommend accessible hobbies, sports, jobs, apartments and restaurants.",
]


def build_tiny_tokenizer(out_dir: str | Path, vocab_size: int = 512):
    """Train a byte-level BPE and save it as a ``PreTrainedTokenizerFast`` with a chat template.

    Byte-level, so every string (any Unicode prompt the tests invent) encodes
    without unknown tokens and decodes back to itself.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS),
        chat_template=CHAT_TEMPLATE,
    )
    fast.save_pretrained(str(out_dir))
    return fast


def build_tiny_chat_model(
    out_dir: str | Path,
    *,
    arch: str = "llama",
    seed: int = 0,
    vocab_size: int = 512,
    max_position_embeddings: int = 512,
) -> Path:
    """Save a random-init 2-layer causal LM plus tokenizer to ``out_dir``; return the dir.

    ``arch`` is ``"llama"`` or ``"qwen2"``. The embedding is not tied to the
    head so the LoRA builder and the tests can poke at ``lm_head`` alone.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tiny_tokenizer(out, vocab_size=vocab_size)
    common = dict(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    if arch == "llama":
        config, cls = LlamaConfig(**common), LlamaForCausalLM
    elif arch == "qwen2":
        config, cls = Qwen2Config(**common), Qwen2ForCausalLM
    else:
        raise ValueError(f"arch must be 'llama' or 'qwen2', got {arch!r}")
    torch.manual_seed(seed)
    model = cls(config)
    model.save_pretrained(str(out))
    return out


def build_tiny_lora_adapter(model_dir: str | Path, out_dir: str | Path, *, seed: int = 1, r: int = 4) -> Path:
    """Save a LoRA adapter on q_proj/v_proj for the model in ``model_dir``; return ``out_dir``.

    peft initialises B to zero (a no-op adapter); we randomise it so a test can
    see that the adapter was really applied.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True)
    cfg = LoraConfig(r=r, lora_alpha=2 * r, target_modules=["q_proj", "v_proj"], lora_dropout=0.0,
                     init_lora_weights=False, task_type="CAUSAL_LM")
    torch.manual_seed(seed)
    peft_model = get_peft_model(base, cfg)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.normal_(0.0, 1.0)
    out = Path(out_dir)
    peft_model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def tiny_chat_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny_llama"), arch="llama")


@pytest.fixture(scope="session")
def tiny_qwen2_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny_qwen2"), arch="qwen2")


@pytest.fixture(scope="session")
def tiny_lora_adapter_dir(tiny_chat_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lora_adapter(tiny_chat_model_dir, tmp_path_factory.mktemp("tiny_lora"))
