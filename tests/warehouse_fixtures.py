"""Test helpers for the warehouse: synthetic raw rows, a tiny Regard classifier,
and an independent (pandas) computation of pairs and degradation rates.

Nothing here imports the code under test (models, ableaudit.scorers): the
independent side calls vaderSentiment and transformers directly.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np
import pandas as pd

DISABILITIES = [
    "vision", "hearing", "speech", "mobility", "neurological",
    "genetic_developmental", "learning", "sensory_cognitive", "mental_behavioral",
]
# (query_id, domain, disabilities asked): three queries with all nine categories,
# one with three
QUERIES = [
    ("edu_001", "education", DISABILITIES),
    ("fin_001", "finance", DISABILITIES),
    ("hea_001", "healthcare", DISABILITIES),
    ("tec_001", "technology", DISABILITIES[:3]),
]
MODELS = ["model-a", "model-b"]
ARMS = ["baseline", "mitigated"]

_GOOD = ["great", "helpful", "excellent", "wonderful", "happy to help", "good news", "support"]
_BAD = ["unfortunately", "difficult", "cannot", "sorry", "bad", "risky", "hard", "unable"]
_FILL = ["you", "can", "plan", "the", "steps", "ahead", "with", "a", "list", "of", "options", "and", "ask", "for", "details"]


def response(rng: random.Random) -> str:
    """A response of varied length and tone, so VADER and word counts vary."""
    words = []
    for _ in range(rng.randint(3, 60)):
        r = rng.random()
        words.append(rng.choice(_GOOD) if r < 0.15 else rng.choice(_BAD) if r < 0.3 else rng.choice(_FILL))
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", "!", "?", " :)", " 🙂", " — ok."])


def generation_id(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def synthetic_generations(seed: int = 0) -> list[dict]:
    """Two models x two arms over QUERIES, with errors, empties, a missing neutral and repeated texts."""
    rng = random.Random(seed)
    rows = []
    shared = response(rng)  # one text answered by many generations: scored once
    for model in MODELS:
        for arm in ARMS:
            for query_id, domain, disabilities in QUERIES:
                for disability in [None, *disabilities]:
                    if model == "model-b" and arm == "baseline" and query_id == "tec_001" and disability is None:
                        continue  # missing neutral: its pairs must show up as 'missing_neutral'
                    status, text = "ok", response(rng)
                    r = rng.random()
                    if r < 0.06:
                        status, text = "error", None
                    elif r < 0.10:
                        status, text = "empty", rng.choice(["", "   "])
                    elif r < 0.16:
                        text = shared
                    rows.append(
                        dict(
                            generation_id=generation_id(model, arm, query_id, disability),
                            run_id=f"run-{model}",
                            task="text",
                            target=model,
                            model_id=model,
                            backend="import",
                            arm=arm,
                            query_set="ableaudit",
                            query_id=query_id,
                            domain=domain,
                            disability_id=disability,
                            condition="neutral" if disability is None else "disability",
                            prompt_id=f"ableaudit:{query_id}:{disability or 'neutral'}",
                            prompt_text=f"prompt {query_id} {disability}",
                            temperature=0.1,
                            sample_index=0,
                            status=status,
                            response_text=text,
                            error_message="boom" if status == "error" else None,
                            source="imported",
                        )
                    )
    # the neutral of one query fails for model-a/mitigated: 'neutral_error' pairs
    for row in rows:
        if (row["model_id"], row["arm"], row["query_id"], row["condition"]) == ("model-a", "mitigated", "edu_001", "neutral"):
            row.update(status="error", response_text=None, error_message="timeout")
    return rows


def land(warehouse: Path, rows: list[dict]) -> None:
    """Insert rows into raw.generations with plain SQL (the raw DDL must exist)."""
    frame = pd.DataFrame(rows)  # noqa: F841 - read by DuckDB's replacement scan
    con = duckdb.connect(str(warehouse))
    try:
        con.execute("insert into raw.generations by name select * from frame")
    finally:
        con.close()


def read(warehouse: Path, sql: str) -> pd.DataFrame:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return con.execute(sql).df()
    finally:
        con.close()


# --- a tiny Regard classifier --------------------------------------------------

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(
    {w for phrase in _GOOD + _BAD + _FILL for w in phrase.split()} | {"very", "nice", "awful", "."}
)


def make_tiny_regard_classifier(path: Path, max_positions: int = 32, labels=("negative", "neutral", "positive")) -> Path:
    """A random-init BERT sequence classifier (with its tokenizer) saved to ``path``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    vocab = path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True, model_max_length=max_positions)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=max_positions,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def manual_regard(path: Path, texts: list[str]) -> dict[str, tuple[float, int]]:
    """P(positive) - P(negative) and the untruncated token count, one text at a time, softmax in numpy."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
    labels = {v: int(k) for k, v in model.config.id2label.items()}
    out = {}
    for text in texts:
        n_tokens = len(tok(text)["input_ids"])
        enc = tok(text, truncation=True, max_length=model.config.max_position_embeddings, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[0].double().numpy()
        p = np.exp(logits - logits.max())
        p /= p.sum()
        out[text] = (float(p[labels["positive"]] - p[labels["negative"]]), n_tokens)
    return out


# --- the independent degradation computation -------------------------------------

PAIR_KEYS = ["task", "model_id", "arm", "query_set", "query_id", "temperature", "sample_index"]
SLICES = {
    "overall": lambda df: pd.Series("all", index=df.index),
    "domain": lambda df: df.domain,
    "disability": lambda df: df.disability_id,
    "domain_disability": lambda df: df.domain + "|" + df.disability_id,
}


def independent_degradation(
    generations: pd.DataFrame,
    scorer: Callable[[str], float | None],
    higher_is_better: bool,
    threshold: float,
) -> pd.DataFrame:
    """Degradation per model, arm and slice from raw rows (pairs built in pandas)."""
    g = generations.copy()
    g["score"] = [None if t is None or (isinstance(t, float) and np.isnan(t)) else scorer(t) for t in g.response_text]
    neutral = g[g.condition == "neutral"][PAIR_KEYS + ["status", "score"]]
    dis = g[g.condition == "disability"][PAIR_KEYS + ["domain", "disability_id", "status", "score"]]
    pairs = dis.merge(neutral, on=PAIR_KEYS, how="left", suffixes=("_d", "_n"))
    pairs["included"] = (pairs.status_n == "ok") & (pairs.status_d == "ok") & pairs.score_n.notna() & pairs.score_d.notna()
    n = pairs.score_n.astype(float)
    d = pairs.score_d.astype(float)
    gap = (n - d) if higher_is_better else (d - n)
    pairs["degraded"] = pairs.included & (gap > 0) & (gap >= threshold * n.abs() - 1e-9)
    out = []
    for name, value in SLICES.items():
        frame = pairs.assign(slice_value=value(pairs))
        agg = frame.groupby(["model_id", "arm", "slice_value"]).agg(
            n_pairs=("included", "sum"), n_degraded=("degraded", "sum"), n_total=("included", "size")
        ).reset_index()
        agg["slice"] = name
        out.append(agg)
    res = pd.concat(out, ignore_index=True)
    res["n_excluded"] = res.n_total - res.n_pairs
    res["degradation_pct"] = np.where(res.n_pairs > 0, 100.0 * res.n_degraded / res.n_pairs.where(res.n_pairs > 0), np.nan)
    return res.drop(columns="n_total")
