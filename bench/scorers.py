"""Texts per second of the per-text scorers: VADER in one process against a pool of worker
processes, and the transformer scorers batched by token length against batches in the given order.

Why: DuckDB calls a Python scorer one vector (2,048 texts) at a time under the
GIL, so VADER used one core whatever the machine had. The pool
(``ableaudit.scorers.parallel``) splits each vector over the available cores.
This prints, for the same synthetic answers (~250 words, as long as a typical
chat answer), both rates side by side and the ratio, first calling the scorer
directly, then through DuckDB as a build does (``select vader_compound(text)``),
and checks that every compound is bit-identical to vaderSentiment's own.

    .venv/bin/python bench/scorers.py                 # 8,192 texts, workers = available cores
    .venv/bin/python bench/scorers.py --texts 20000 --workers 2

The encoders (``--part encoders``): a Regard-sized classifier (the roberta-base
configuration, 125M parameters, as sasha/regardv3) through the Regard scorer's
own batching (``ableaudit.scorers.regard.score_texts``), and a detector-sized
pair detector (the all-MiniLM-L6-v2 configuration with a LoRA and the four
heads) through ``ableaudit.adapters.detector.infer.score_pairs``. Both are
random-init from a configuration built here, with a word-level tokenizer of the
synthetic vocabulary: nothing is downloaded. The texts are 20 to 400 words,
as answers vary. Each encoder scores them twice, in batches of the given order
and in batches sorted by token length, and prints texts/s for both, the ratio
and the largest difference between the two paths' probabilities (0 up to float
rounding in float32; bfloat16 rounds more).

``--part unavailable``: a rebuild of the Regard scores while the classifier is
missing, in DuckDB with the real UDF, retrying every 'unavailable' text (the
rule before the availability probe) against the probe and the unchanged
reason (the model's rule now): rows rewritten and seconds.

    .venv/bin/python bench/scorers.py --part encoders                  # CPU, 64 texts
    .venv/bin/python bench/scorers.py --part unavailable --texts 20000  # Regard classifier missing
    python bench/scorers.py --part encoders --device cuda --encoder-texts 4096 --dtype bfloat16 \
        --json /tmp/encoders.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _synthetic import WORDS as _WORDS  # noqa: E402 (bench/ is the script's folder)


def synthetic_texts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=words)) + "!" * (i % 3) for i in range(n)]


def _time(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def vader_bench(args: argparse.Namespace) -> tuple[dict, bool]:
    from ableaudit.scorers import parallel, vader

    workers = args.workers or parallel.available_cores()
    texts = synthetic_texts(args.texts, args.words, args.seed)

    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    reference = SentimentIntensityAnalyzer()
    expected = [reference.polarity_scores(t)["compound"] for t in texts]

    # Start the pool before timing: a build pays the spawn once, not per vector.
    parallel.map_batches(vader.vader_compound, texts[: parallel.MIN_PARALLEL_TEXTS], workers)
    serial_s, serial = _time(lambda: vader.vader_compound(texts))
    pool_s, pooled = _time(lambda: parallel.map_batches(vader.vader_compound, texts, workers))

    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    con.register("texts", pa.table({"t": texts}))
    con.create_function(
        "vader_serial",
        lambda a: pa.array(vader.vader_compound(a.to_pylist()), pa.float64()),
        ["VARCHAR"],
        "DOUBLE",
        type="arrow",
    )
    con.create_function(
        "vader_pool",
        lambda a: pa.array(
            parallel.map_batches(vader.vader_compound, a.to_pylist(), workers), pa.float64()
        ),
        ["VARCHAR"],
        "DOUBLE",
        type="arrow",
    )
    sql_serial_s, sql_serial = _time(
        lambda: con.sql("select vader_serial(t) from texts").fetchall()
    )
    sql_pool_s, sql_pool = _time(lambda: con.sql("select vader_pool(t) from texts").fetchall())

    identical = (
        serial == expected
        and pooled == expected
        and sorted(r[0] for r in sql_serial) == sorted(expected)
        and sorted(r[0] for r in sql_pool) == sorted(expected)
    )
    n = len(texts)
    print(
        f"{n} texts of {args.words} words; pool of {workers} worker processes "
        f"({parallel.available_cores()} cores available)"
    )
    print(f"{'path':<28}{'one process':>14}{'pool':>14}{'ratio':>9}")
    print(
        f"{'vader_compound (direct)':<28}{n / serial_s:>10.0f} t/s{n / pool_s:>10.0f} t/s"
        f"{serial_s / pool_s:>8.2f}x"
    )
    print(
        f"{'vader_compound (in DuckDB)':<28}{n / sql_serial_s:>10.0f} t/s{n / sql_pool_s:>10.0f} t/s"
        f"{sql_serial_s / sql_pool_s:>8.2f}x"
    )
    print(f"compounds bit-identical to vaderSentiment: {identical}")
    parallel.shutdown()
    figures = {
        "texts": n,
        "workers": workers,
        "direct_serial_tps": n / serial_s,
        "direct_pool_tps": n / pool_s,
        "sql_serial_tps": n / sql_serial_s,
        "sql_pool_tps": n / sql_pool_s,
        "bit_identical": identical,
    }
    return figures, identical


# ----------------------------------------------------------------------------- the encoders

# sasha/regardv3 is a roberta-base sequence classifier with these labels
REGARD_SIZED = dict(
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    vocab_size=50265,
    max_position_embeddings=514,
    type_vocab_size=1,
)
REGARD_LABELS = ("negative", "neutral", "other", "positive")
# the detector's default base, all-MiniLM-L6-v2 (a BERT)
DETECTOR_SIZED = dict(
    hidden_size=384,
    num_hidden_layers=6,
    num_attention_heads=12,
    intermediate_size=1536,
    vocab_size=30522,
    max_position_embeddings=512,
)


def varied_texts(n: int, seed: int, low: int = 20, high: int = 400) -> list[str]:
    """n synthetic answers of low..high words (a skewed spread: most are short to middling)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = int(low + (high - low) * rng.random() ** 1.5)
        out.append(" ".join(rng.choices(_WORDS, k=words)) + ".")
    return out


def word_tokenizer(out_dir: Path, max_length: int):
    """A BERT word-piece tokenizer over the synthetic vocabulary (one token per word), offline."""
    from transformers import BertTokenizerFast

    vocab = out_dir / "vocab.txt"
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab.write_text("\n".join(specials + sorted(set(_WORDS)) + [".", "!"]) + "\n")
    return BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True, model_max_length=max_length)


def _dtype(name: str):
    import torch

    return getattr(torch, name)


def regard_sized(tokenizer, device: str, dtype: str):
    """A RegardModel around a random-init roberta-base-shaped classifier."""
    import torch
    from transformers import RobertaConfig, RobertaForSequenceClassification

    from ableaudit.scorers.regard import RegardModel

    torch.manual_seed(0)
    config = RobertaConfig(
        **REGARD_SIZED,
        num_labels=len(REGARD_LABELS),
        id2label=dict(enumerate(REGARD_LABELS)),
        label2id={label: i for i, label in enumerate(REGARD_LABELS)},
        pad_token_id=tokenizer.pad_token_id,
    )
    model = RobertaForSequenceClassification(config).to(device=device, dtype=_dtype(dtype)).eval()
    return RegardModel(
        tokenizer=tokenizer,
        model=model,
        positive_index=REGARD_LABELS.index("positive"),
        negative_index=REGARD_LABELS.index("negative"),
        max_tokens=512,
        device=device,
    )


def detector_sized(tokenizer, device: str, dtype: str):
    """A LoadedDetector around a random-init all-MiniLM-L6-v2-shaped encoder with a LoRA and heads."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import BertConfig, BertModel

    from ableaudit.adapters.detector.model import LoadedDetector, _torch_module

    torch.manual_seed(0)
    encoder = BertModel(BertConfig(**DETECTOR_SIZED, pad_token_id=tokenizer.pad_token_id))
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["query", "value"], bias="none")
    det = _torch_module()(get_peft_model(encoder, lora)).to(device)
    det.encoder.to(_dtype(dtype))
    det.eval()
    meta = {"max_length": 512, "overflow": "truncate"}
    return LoadedDetector(tokenizer=tokenizer, model=det, meta=meta, device=device)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _best(fn, repeat: int, device: str):
    best_s, value = None, None
    for _ in range(repeat):
        _sync(device)
        start = time.perf_counter()
        value = fn()
        _sync(device)
        elapsed = time.perf_counter() - start
        best_s = elapsed if best_s is None else min(best_s, elapsed)
    return best_s, value


def encoder_bench(args: argparse.Namespace) -> dict:
    import torch

    from ableaudit.adapters.detector.infer import score_pairs
    from ableaudit.scorers.regard import score_texts

    if args.threads:
        torch.set_num_threads(args.threads)
    device = (
        ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    )
    dtype = args.dtype or ("float32" if device == "cpu" else "bfloat16")
    n = args.encoder_texts or (64 if device == "cpu" else 4096)
    texts = varied_texts(n, args.seed)
    # a detector reads a pair: two answers, so each side is about half as long
    pair_texts = varied_texts(2 * n, args.seed + 1, low=10, high=200)
    pairs = list(zip(pair_texts[:n], pair_texts[n:]))
    figures: dict = {"device": device, "dtype": dtype, "texts": n, "batch": args.encoder_batch}
    rows = []
    with tempfile.TemporaryDirectory(prefix="ableaudit-bench-") as tmp:
        tokenizer = word_tokenizer(Path(tmp), 512)
        lengths = [len(i) for i in tokenizer(texts, verbose=False)["input_ids"]]
        figures["tokens_min_mean_max"] = [min(lengths), sum(lengths) / n, max(lengths)]

        rm = regard_sized(tokenizer, device, dtype)
        score_texts(rm, texts[: args.encoder_batch], args.encoder_batch)  # warm-up
        runs = {}
        for sort in (False, True):
            runs[sort] = _best(
                lambda sort=sort: score_texts(rm, texts, args.encoder_batch, sort),
                args.repeat,
                device,
            )
        diff = max(
            abs(a.p_positive - b.p_positive) + abs(a.p_negative - b.p_negative)
            for a, b in zip(runs[False][1], runs[True][1])
        )
        bad = sum(s.status not in ("ok", "truncated") for s in runs[True][1])
        rows.append(("regard-sized (roberta-base)", runs[False][0], runs[True][0], diff, bad))
        params = sum(p.numel() for p in rm.model.parameters())
        rm.model = None  # frees it before the detector is built

        det = detector_sized(tokenizer, device, dtype)
        score_pairs(det, pairs[: args.encoder_batch], args.encoder_batch)  # warm-up
        runs = {}
        for sort in (False, True):
            runs[sort] = _best(
                lambda sort=sort: score_pairs(det, pairs, args.encoder_batch, sort),
                args.repeat,
                device,
            )
        diff = max(
            max(abs(x - y) for x, y in zip(a.probs[d], b.probs[d]))
            for a, b in zip(runs[False][1], runs[True][1])
            for d in a.probs
        )
        bad = sum(v.status not in ("scored", "truncated") for v in runs[True][1])
        rows.append(("detector-sized (MiniLM-L6+LoRA)", runs[False][0], runs[True][0], diff, bad))
        det_params = sum(p.numel() for p in det.model.parameters())

    print(
        f"encoders: {n} texts ({figures['tokens_min_mean_max'][0]}-"
        f"{figures['tokens_min_mean_max'][2]} tokens, mean {figures['tokens_min_mean_max'][1]:.0f}), "
        f"batch {args.encoder_batch}, {device} {dtype}, torch threads {torch.get_num_threads()}, "
        f"best of {args.repeat}; {params / 1e6:.0f}M and {det_params / 1e6:.0f}M parameters"
    )
    print(f"{'encoder':<34}{'given order':>14}{'by length':>14}{'ratio':>8}{'max |diff|':>12}")
    for name, plain_s, sorted_s, diff, bad in rows:
        print(
            f"{name:<34}{n / plain_s:>10.1f} t/s{n / sorted_s:>10.1f} t/s"
            f"{plain_s / sorted_s:>7.2f}x{diff:>12.2e}" + (f"  ({bad} not scored)" if bad else "")
        )
        key = "regard" if name.startswith("regard") else "detector"
        figures[key] = {
            "given_order_tps": n / plain_s,
            "by_length_tps": n / sorted_s,
            "ratio": plain_s / sorted_s,
            "max_abs_diff": diff,
            "not_scored": bad,
        }
    figures["ok"] = all(bad == 0 for *_, bad in rows)
    return figures


def unavailable_bench(args: argparse.Namespace) -> dict:
    """A rebuild of response_scores_regard while the classifier is missing, in DuckDB: every
    'unavailable' text sent to regard_score and its row rewritten (the rule before the probe)
    against the probe and an anti-join on the unchanged reason (the model's rule now)."""
    import duckdb

    from ableaudit.dbt.plugin import register_udfs

    n = args.texts
    texts = synthetic_texts(n, args.words, args.seed)
    missing = str(Path(tempfile.gettempdir()) / "ableaudit-bench-no-regard-model")
    con = duckdb.connect()
    register_udfs(con)
    con.execute(
        "create table texts as select sha256(t) as text_hash, t as response_text "
        "from unnest(?) as u(t)",
        [texts],
    )
    scored = (
        "select text_hash, s.status, s.reason, current_timestamp as scored_at from "
        "(select text_hash, regard_score(response_text, '{ref}', 32) as s from pending)"
    )
    con.execute(
        "create table scores as " + scored.format(ref=missing).replace("from pending", "from texts")
    )
    before = (
        "create or replace temp view pending as select texts.* from texts anti join "
        "(select text_hash from scores where status not in ('unavailable', 'error')) done "
        "using (text_hash)"
    )
    now = (
        before + " cross join (select regard_score('', '{ref}', 0) as probe) availability "
        "left join (select text_hash, reason from scores where status = 'unavailable') prev "
        "using (text_hash) where prev.text_hash is null "
        "or availability.probe.status != 'unavailable' "
        "or prev.reason is distinct from availability.probe.reason"
    )

    def rebuild(pending_sql: str) -> int:
        con.execute(pending_sql.format(ref=missing))
        con.execute("create or replace temp table batch as " + scored.format(ref=missing))
        con.execute("delete from scores where text_hash in (select text_hash from batch)")
        con.execute("insert into scores select * from batch")
        return con.execute("select count(*) from batch").fetchone()[0]

    rebuild(now)  # warm-up: the availability check is remembered from here on
    before_s, before_rows = _best(lambda: rebuild(before), args.repeat, "cpu")
    now_s, now_rows = _best(lambda: rebuild(now), args.repeat, "cpu")
    print(f"response_scores_regard rebuild, classifier missing, {n} unavailable texts:")
    print(f"{'rule':<44}{'rows rewritten':>15}{'seconds':>10}")
    print(f"{'every unavailable text retried':<44}{before_rows:>15}{before_s:>10.3f}")
    print(f"{'probe, rows with the same reason kept':<44}{now_rows:>15}{now_s:>10.3f}")
    print(f"ratio: {before_s / now_s:.1f}x")
    return {
        "texts": n,
        "retry_all_rows": before_rows,
        "retry_all_s": before_s,
        "probe_rows": now_rows,
        "probe_s": now_s,
        "ratio": before_s / now_s,
        "ok": now_rows == 0 and before_rows == n,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part",
        choices=("all", "vader", "encoders", "unavailable"),
        default="all",
        help="what to measure",
    )
    parser.add_argument("--texts", type=int, default=8192, help="how many texts VADER scores")
    parser.add_argument("--words", type=int, default=250, help="words per synthetic VADER text")
    parser.add_argument(
        "--workers", type=int, default=None, help="pool size (default: the available cores)"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic texts")
    parser.add_argument("--device", default="auto", help="encoders: auto | cpu | cuda")
    parser.add_argument(
        "--dtype", default=None, help="encoders: float32 (CPU default) | bfloat16 (GPU default)"
    )
    parser.add_argument(
        "--encoder-texts", type=int, default=None, help="encoders: texts (64 on CPU, 4096 on GPU)"
    )
    parser.add_argument("--encoder-batch", type=int, default=32, help="encoders: batch size")
    parser.add_argument("--repeat", type=int, default=1, help="best of N rounds (not VADER)")
    parser.add_argument("--threads", type=int, default=None, help="encoders: torch CPU threads")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    args = parser.parse_args()

    figures: dict = {}
    ok = True
    if args.part in ("all", "vader"):
        figures["vader"], ok = vader_bench(args)
    if args.part in ("all", "unavailable"):
        figures["unavailable"] = unavailable_bench(args)
        ok = ok and figures["unavailable"]["ok"]
    if args.part in ("all", "encoders"):
        figures["encoders"] = encoder_bench(args)
        ok = ok and figures["encoders"]["ok"]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
