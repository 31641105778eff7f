"""Small pieces shared by several backends (stdlib only, so any backend can use them).

Kept free of torch/openai imports: the openai and vllm backends must work in
an environment where the heavy local-inference stack is absent or slow to load.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ableaudit.media import image_bytes, image_data_url

from .base import GenerationRequest

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"}
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def basic_auth_header(url: str) -> str | None:
    """The ``Authorization`` header a URL's userinfo stands for (None without one).

    An HTTP client turns ``http://user:key@host`` into this header and logs the URL whole;
    sending the header with the URL stripped reaches the server the same way and logs no key.
    """
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return None
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def openai_messages(request: GenerationRequest) -> list[dict[str, Any]]:
    """Chat messages in OpenAI wire format; images attach to the last user message.

    The audit's requests carry images separately from the text so the landing
    table can store the prompt text alone; servers want them as ``image_url``
    content parts next to the text they belong to.
    """
    msgs = [dict(m) for m in request.messages]
    if not request.images:
        return msgs
    user_idx = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
    if not user_idx:
        raise ValueError("request has images but no user message to attach them to")
    i = user_idx[-1]
    content = msgs[i].get("content")
    parts: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    )
    parts += [
        {"type": "image_url", "image_url": {"url": image_data_url(image_bytes(img))}}
        for img in request.images
    ]
    msgs[i]["content"] = parts
    return msgs


def is_local_url(url: str | None) -> bool:
    if not url:
        return False
    from urllib.parse import urlparse

    host = urlparse(url).hostname or ""
    return host in _LOCAL_HOSTS or host.endswith(".localhost")


def normalize_finish_reason(reason: str | None) -> str | None:
    """Map engine spellings to the warehouse's 'stop' | 'length'; keep anything else (e.g. content_filter)."""
    if reason is None:
        return None
    r = str(reason).lower()
    if r in ("stop", "eos", "eos_token", "stop_sequence", "end_turn"):
        return "stop"
    if r in ("length", "max_tokens", "max_new_tokens"):
        return "length"
    return r


def dir_fingerprint(
    path: str | Path, weight_suffixes: Sequence[str] = (".safetensors", ".bin", ".pt")
) -> str:
    """A short hash identifying a local model/adapter directory without reading all its weights.

    Hashes every JSON/template file in full (config, tokenizer, chat template:
    these change behaviour) and, for weight files, their name, size and first
    and last MiB (safetensors headers list every tensor's offsets, so a
    re-trained checkpoint differs there). This identifies a checkpoint; it is
    not a cryptographic pin of every weight byte.
    """
    root = Path(path)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = f.relative_to(root).as_posix()
        if rel.startswith(".") or "/." in rel:
            continue
        h.update(rel.encode() + b"\0")
        if f.suffix in weight_suffixes:
            size = f.stat().st_size
            h.update(str(size).encode())
            with open(f, "rb") as fh:
                h.update(fh.read(1 << 20))
                if size > 2 << 20:
                    fh.seek(-(1 << 20), os.SEEK_END)
                    h.update(fh.read())
        elif f.suffix in (".json", ".jinja", ".txt", ".model", ".py", ".yaml", ".yml"):
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def hf_cache_commit(repo_id: str, revision: str | None = None) -> str | None:
    """The commit sha a Hub model id resolves to in the local HF cache, or None.

    Reads the cache layout (``models--org--name/refs/<rev>``) directly, so it
    works offline and without huggingface_hub (the vllm worker venv may not
    expose it to us).
    """
    if revision and _SHA_RE.match(revision):
        return revision
    cache = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"),
        "hub",
    )
    ref = Path(cache) / ("models--" + repo_id.replace("/", "--")) / "refs" / (revision or "main")
    try:
        sha = ref.read_text().strip()
    except OSError:
        return None
    return sha if _SHA_RE.match(sha) else None


def model_revision_string(model: str, revision: str | None, adapter: str | None = None) -> str:
    """What pins a transformers/vllm model: local dir + fingerprint, or Hub id @ commit."""
    p = Path(model)
    if p.is_dir():
        rev = f"{p.resolve()}#{dir_fingerprint(p)}"
    else:
        sha = hf_cache_commit(model, revision)
        rev = f"{model}@{sha or revision or 'unresolved'}"
    if adapter:
        a = Path(adapter)
        rev += (
            f"+adapter:{a.resolve()}#{dir_fingerprint(a)}" if a.is_dir() else f"+adapter:{adapter}"
        )
    return rev


def chunks(seq: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def cut_completion(
    tokens: Sequence[int], max_new_tokens: int, eos: set[int], ignore_eos: bool = False
) -> tuple[list[int], str, int]:
    """The text tokens of one generated row, its finish reason and its completion token count.

    The row is cut at the first end-of-sequence token ('stop', which counts as a
    generated token) unless `ignore_eos`; otherwise it ran to the limit ('length').
    """
    toks = list(tokens[:max_new_tokens])
    stop_at = next((k for k, t in enumerate(toks) if t in eos), None)
    if stop_at is not None and not ignore_eos:
        return toks[:stop_at], "stop", stop_at + 1
    return toks, "length", len(toks)
