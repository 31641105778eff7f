"""Offline vLLM batch worker, and the Parquet exchange format it shares with the ``vllm`` backend.

Why a separate process: vLLM needs a GPU and pins its own torch/transformers
versions, which conflict with the audit's environment (Prefect, dbt, the CPU
torch). So the audit writes its requests to a Parquet file, a worker running
in a *separate* virtualenv that has vLLM generates them all in one offline
batch (``vllm.LLM.chat``), and writes a responses Parquet file the audit reads
back. This module is that worker. It imports only the standard library and
pyarrow at module level, and vLLM only inside ``main``, so it is importable
(for the schema helpers) where vLLM is absent, and it does not import the rest
of ableaudit: the single file can be copied to a GPU box and run as a script.

Setting up the worker venv (once, on a machine with a GPU)::

    python -m venv /opt/vllm-venv
    /opt/vllm-venv/bin/pip install vllm pyarrow

Then point the audit at it, either for all vllm targets::

    export ABLEAUDIT_VLLM_PYTHON=/opt/vllm-venv/bin/python

or per target in the audit config::

    - name: qwen2.5-7b
      backend: vllm
      model: Qwen/Qwen2.5-7B-Instruct
      revision: main
      batch_size: 512            # responses per part: the worker loads the model once for all
                                 # pending requests and writes a part every 512 (landed as it comes)
      options:
        worker_cmd: /opt/vllm-venv/bin/python -m ableaudit.backends.vllm_worker
        worker_args: ["--tensor-parallel-size", "2", "--max-model-len", "8192"]
        timeout_s: 7200          # optional wall-clock limit for one worker run
        exchange_dir: runs/vllm  # optional: keep the Parquet files and worker log

Running the worker by hand (what the backend does)::

    /opt/vllm-venv/bin/python -m ableaudit.backends.vllm_worker requests.parquet responses.parquet \\
        --model Qwen/Qwen2.5-7B-Instruct [--revision REV] [--dtype bfloat16] \\
        [--tensor-parallel-size N] [--max-model-len N] [--gpu-memory-utilization 0.9] \\
        [--max-lora-rank 64] [--llm-kwargs '{"enforce_eager": true}'] [--part-rows 512]

    # or, with this file copied elsewhere:  python vllm_worker.py requests.parquet responses.parquet --model ...
    # check a requests file without loading vLLM:  ... vllm_worker requests.parquet out.parquet --validate-only

Exchange format (version 1; the file's schema metadata carries
``ableaudit.exchange = vllm-requests/1`` or ``vllm-responses/1``):

requests.parquet, one row per generation:
  key             string, unique, not null   the generation id; responses carry it back
  messages_json   string, not null           JSON list of chat messages ({"role", "content"});
                                             content may be a list of OpenAI parts (text, image_url data URLs)
  temperature     double >= 0                0 = greedy
  top_p           double in (0, 1]
  max_new_tokens  int64 >= 1
  seed            int64, null = unseeded     per-request sampling seed
  model           string                     the same on every row; must match --model if given
  revision        string, nullable           the same on every row
  adapter         string, nullable           a LoRA directory; rows may differ (vLLM multi-LoRA)
  json_schema     string, nullable           a JSON Schema (as JSON text) the completion is constrained to
                                             (structured output: vLLM's structured_outputs / guided_decoding);
                                             optional: a file without the column reads as all null

responses.parquet, one row per request key (a missing key counts as an error):
  key               string, not null
  status            string: ok | empty | error
  text              string, null when status = error
  finish_reason     string: stop | length | abort | null
  error             string, null unless status = error
  prompt_tokens     int64, nullable
  completion_tokens int64, nullable (includes the EOS token, as vLLM counts)
  latency_ms        double, nullable: the wall time of the vLLM batch the row ran in, divided by its size
                    (an offline batch has no per-request latency; this is the amortised cost)
  metadata: ableaudit.model_revision (model @ commit sha from the HF cache, or the local dir),
            ableaudit.vllm_version

Semantics: sampling parameters are exactly the row's (vLLM's defaults for the
rest, not the model's generation_config). A batch that raises (e.g. one prompt
longer than max-model-len) is retried one request at a time, so only the bad
rows become errors. Exit codes: 0 the responses file was written (some rows
may be errors), 2 the requests file or arguments are invalid, 3 vLLM could not
be imported or the model could not be loaded. The responses file is written to
a temporary name and renamed, so a crashed worker never leaves a half file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

EXCHANGE_KEY = b"ableaudit.exchange"
REQUESTS_TAG = b"vllm-requests/1"
RESPONSES_TAG = b"vllm-responses/1"

REQUEST_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("messages_json", pa.string(), nullable=False),
        pa.field("temperature", pa.float64(), nullable=False),
        pa.field("top_p", pa.float64(), nullable=False),
        pa.field("max_new_tokens", pa.int64(), nullable=False),
        pa.field("seed", pa.int64()),
        pa.field("model", pa.string(), nullable=False),
        pa.field("revision", pa.string()),
        pa.field("adapter", pa.string()),
        pa.field("json_schema", pa.string()),
    ],
    metadata={EXCHANGE_KEY: REQUESTS_TAG},
)
# Columns a file written before they existed may lack: read as null.
OPTIONAL_REQUEST_COLUMNS = ("json_schema",)

RESPONSE_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("finish_reason", pa.string()),
        pa.field("error", pa.string()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
        pa.field("latency_ms", pa.float64()),
    ],
    metadata={EXCHANGE_KEY: RESPONSES_TAG},
)

STATUSES = ("ok", "empty", "error")


class ExchangeError(ValueError):
    """An exchange file is unreadable or breaks the format; the message says which file and what."""


# ------------------------------------------------------------------ exchange files


def _read_table(path: str | Path, schema: pa.Schema, what: str) -> pa.Table:
    p = Path(path)
    if not p.is_file():
        raise ExchangeError(f"{what} file {p} does not exist")
    try:
        table = pq.read_table(p)
    except Exception as e:  # ArrowInvalid, OSError, ... on a truncated or foreign file
        raise ExchangeError(
            f"{what} file {p} is not a readable Parquet file: {type(e).__name__}: {e}"
        ) from None
    for name in OPTIONAL_REQUEST_COLUMNS if schema is REQUEST_SCHEMA else ():
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.string()))
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise ExchangeError(f"{what} file {p} lacks column(s) {missing}; expected {schema.names}")
    try:
        # Casting accepts harmless variants (int32 counts, large_string) but rejects wrong kinds.
        return table.select(schema.names).cast(pa.schema([f.with_nullable(True) for f in schema]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
        raise ExchangeError(f"{what} file {p} has a column of the wrong type: {e}") from None


def _check_unique_keys(keys: Sequence[Any], what: str, path: Any) -> None:
    if any(k is None or k == "" for k in keys):
        raise ExchangeError(f"{what} file {path}: `key` has null/empty values")
    dup = sorted(k for k, n in Counter(keys).items() if n > 1)
    if dup:
        raise ExchangeError(f"{what} file {path}: duplicate keys {dup[:5]}")


def validate_request_rows(rows: Sequence[dict[str, Any]], path: Any = "<rows>") -> None:
    """Raise ExchangeError naming the first problems in request rows (as dicts)."""
    _check_unique_keys([r.get("key") for r in rows], "requests", path)
    problems: list[str] = []
    for r in rows:
        k = r["key"]
        try:
            msgs = json.loads(r["messages_json"]) if r.get("messages_json") is not None else None
        except (TypeError, json.JSONDecodeError) as e:
            problems.append(f"{k}: messages_json is not JSON ({e})")
            msgs = []
        if msgs is not None and (
            not isinstance(msgs, list)
            or not msgs
            or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs)
        ):
            problems.append(
                f"{k}: messages_json must be a non-empty list of {{role, content}} objects"
            )
        if msgs is None:
            problems.append(f"{k}: messages_json is null")
        t, p, n = r.get("temperature"), r.get("top_p"), r.get("max_new_tokens")
        if t is None or not math.isfinite(t) or t < 0:
            problems.append(f"{k}: temperature must be a number >= 0, got {t!r}")
        if p is None or not (0 < p <= 1):
            problems.append(f"{k}: top_p must be in (0, 1], got {p!r}")
        if n is None or n < 1:
            problems.append(f"{k}: max_new_tokens must be >= 1, got {n!r}")
        if not r.get("model"):
            problems.append(f"{k}: model is empty")
        if r.get("json_schema") is not None:
            try:
                if not isinstance(json.loads(r["json_schema"]), dict):
                    problems.append(f"{k}: json_schema must be a JSON object")
            except (TypeError, json.JSONDecodeError) as e:
                problems.append(f"{k}: json_schema is not JSON ({e})")
        if len(problems) >= 10:
            break
    if problems:
        raise ExchangeError(f"requests file {path} is invalid:\n  " + "\n  ".join(problems))
    for col in ("model", "revision"):
        values = {r.get(col) for r in rows}
        if len(values) > 1:
            raise ExchangeError(
                f"requests file {path}: one worker run serves one model, but `{col}` has "
                f"{len(values)} values {sorted(map(str, values))[:5]}; split the file"
            )


def write_requests(path: str | Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Validate request rows and write them as a requests file."""
    validate_request_rows(rows, path)
    table = pa.Table.from_pylist(
        [{f.name: r.get(f.name) for f in REQUEST_SCHEMA} for r in rows], schema=REQUEST_SCHEMA
    )
    return _atomic_write(table, path)


def read_requests(path: str | Path) -> list[dict[str, Any]]:
    rows = _read_table(path, REQUEST_SCHEMA, "requests").to_pylist()
    validate_request_rows(rows, path)
    return rows


def validate_response_rows(rows: Sequence[dict[str, Any]], path: Any = "<rows>") -> None:
    _check_unique_keys([r.get("key") for r in rows], "responses", path)
    bad = [
        f"{r['key']}: status {r.get('status')!r} is not one of {STATUSES}"
        for r in rows
        if r.get("status") not in STATUSES
    ]
    bad += [
        f"{r['key']}: status {r['status']!r} but text is null"
        for r in rows
        if r.get("status") in ("ok", "empty") and r.get("text") is None
    ]
    if bad:
        raise ExchangeError(f"responses file {path} is invalid:\n  " + "\n  ".join(bad[:10]))


def write_responses(
    path: str | Path, rows: Sequence[dict[str, Any]], metadata: dict[str, str] | None = None
) -> Path:
    validate_response_rows(rows, path)
    meta = dict(RESPONSE_SCHEMA.metadata or {})
    meta.update({k.encode(): str(v).encode() for k, v in (metadata or {}).items()})
    schema = RESPONSE_SCHEMA.with_metadata(meta)
    table = pa.Table.from_pylist(
        [{f.name: r.get(f.name) for f in RESPONSE_SCHEMA} for r in rows], schema=schema
    )
    return _atomic_write(table, path)


def read_responses(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Rows and the file's ``ableaudit.*`` metadata; ExchangeError if the file breaks the format."""
    p = Path(path)
    table = _read_table(p, RESPONSE_SCHEMA, "responses")
    raw = pq.read_schema(p).metadata or {}
    meta = {k.decode(): v.decode() for k, v in raw.items() if k.startswith(b"ableaudit.")}
    rows = table.to_pylist()
    validate_response_rows(rows, p)
    return rows, meta


def _atomic_write(table: pa.Table, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, p)
    return p


# ------------------------------------------------------------------ the worker


def _resolve_revision(model: str, revision: str | None) -> str:
    """model@commit from the HF cache (stdlib only), the local dir, or model@revision as given."""
    if Path(model).is_dir():
        return str(Path(model).resolve())
    if revision and re.fullmatch(r"[0-9a-f]{40}", revision):
        return f"{model}@{revision}"
    cache = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"),
        "hub",
    )
    ref = Path(cache) / ("models--" + model.replace("/", "--")) / "refs" / (revision or "main")
    try:
        sha = ref.read_text().strip()
        return f"{model}@{sha}"
    except OSError:
        return f"{model}@{revision or 'unresolved'}"


def _error_row(key: str, exc: BaseException | str, ms: float | None = None) -> dict[str, Any]:
    msg = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return {"key": key, "status": "error", "error": msg, "latency_ms": ms}


def _output_row(key: str, out: Any, ms: float) -> dict[str, Any]:
    comp = out.outputs[0]
    text = comp.text or ""
    return {
        "key": key,
        "status": "ok" if text.strip() else "empty",
        "text": text,
        "finish_reason": comp.finish_reason,
        "prompt_tokens": len(out.prompt_token_ids) if out.prompt_token_ids is not None else None,
        "completion_tokens": len(comp.token_ids),
        "latency_ms": ms,
    }


def run_batch(
    llm: Any, rows: Sequence[dict[str, Any]], make_params: Any, lora: Any = None
) -> list[dict[str, Any]]:
    """Generate rows in one ``llm.chat`` call; on failure, one by one so only bad rows fail."""
    convs = [json.loads(r["messages_json"]) for r in rows]
    t0 = time.perf_counter()
    try:
        outs = llm.chat(convs, [make_params(r) for r in rows], use_tqdm=False, lora_request=lora)
        ms = (time.perf_counter() - t0) * 1000.0 / max(1, len(rows))
        return [_output_row(r["key"], o, ms) for r, o in zip(rows, outs)]
    except Exception as batch_err:
        if len(rows) == 1:
            return [_error_row(rows[0]["key"], batch_err, (time.perf_counter() - t0) * 1000.0)]
    result = []
    for r, conv in zip(rows, convs):
        t1 = time.perf_counter()
        try:
            (o,) = llm.chat([conv], [make_params(r)], use_tqdm=False, lora_request=lora)
            result.append(_output_row(r["key"], o, (time.perf_counter() - t1) * 1000.0))
        except Exception as e:
            result.append(_error_row(r["key"], e, (time.perf_counter() - t1) * 1000.0))
    return result


def structured_output_kwargs(schema: dict[str, Any]) -> dict[str, Any]:
    """The SamplingParams keyword that constrains a completion to a JSON schema, in this vLLM version."""
    try:
        from vllm.sampling_params import StructuredOutputsParams  # vLLM >= 0.10.2

        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:
        pass
    try:
        from vllm.sampling_params import GuidedDecodingParams  # vLLM 0.6 - 0.10

        return {"guided_decoding": GuidedDecodingParams(json=schema)}
    except ImportError:
        raise RuntimeError(
            "this vLLM has neither StructuredOutputsParams nor GuidedDecodingParams: it cannot "
            "constrain output to a JSON schema; upgrade vllm or set the judge's structured_output: off"
        ) from None


# --------------------------------------------------------------- Ray Data (--engine ray-data)
# The same requests and responses files, generated by a Ray Data pipeline over a Ray cluster:
# ray.data.llm's vLLM engine processor, one vLLM replica per `--ray-concurrency`, each on its
# own GPU(s) of the cluster. Rows come back in the order they finish; each carries its key.
RAY_ERROR = "__inference_error__"  # ray.data.llm: a failed row (should_continue_on_error)


def ray_data_preprocess(row: dict[str, Any]) -> dict[str, Any]:
    """One request row -> what ray.data.llm's vLLM processor reads (chat messages, sampling
    parameters), keeping the key so each answer maps back to its request."""
    params: dict[str, Any] = {
        "temperature": float(row["temperature"]),
        "top_p": float(row["top_p"]),
        "max_tokens": int(row["max_new_tokens"]),
    }
    if row.get("seed") is not None:
        params["seed"] = int(row["seed"])
    if row.get("json_schema"):
        params["structured_outputs"] = {"json": json.loads(row["json_schema"])}
    return {
        "key": row["key"],
        "messages": json.loads(row["messages_json"]),
        "sampling_params": params,
    }


def ray_data_postprocess(row: dict[str, Any]) -> dict[str, Any]:
    """A processor output row -> the columns the responses file needs (still keyed)."""
    seconds = row.get("time_taken_llm")
    return {
        "key": row["key"],
        "generated_text": row.get("generated_text") or "",
        "num_input_tokens": row.get("num_input_tokens"),
        "num_generated_tokens": row.get("num_generated_tokens"),
        "time_taken_llm": float(seconds) if seconds is not None and seconds >= 0 else None,
    }


def ray_data_response(row: dict[str, Any], max_tokens: dict[str, int]) -> dict[str, Any]:
    """A row out of the Ray Data pipeline (postprocessed, or an error row that bypassed the
    postprocess) -> a response row. Ray reports no finish reason: an answer that used all of
    its ``max_new_tokens`` is 'length', else 'stop'."""
    key = str(row["key"])
    if row.get(RAY_ERROR):
        return _error_row(key, f"ray.data.llm: {row[RAY_ERROR]}")
    text = row.get("generated_text") or ""
    done = row.get("num_generated_tokens")
    seconds = row.get("time_taken_llm")
    return {
        "key": key,
        "status": "ok" if text.strip() else "empty",
        "text": text,
        "finish_reason": "length" if done is not None and done >= max_tokens[key] else "stop",
        "prompt_tokens": row.get("num_input_tokens"),
        "completion_tokens": done,
        "latency_ms": seconds * 1000.0 if seconds is not None else None,
    }


def run_ray_data(
    rows: Sequence[dict[str, Any]],
    *,
    model: str,
    engine_kwargs: dict[str, Any],
    concurrency: int,
    batch_size: int,
    part_rows: int,
    on_part: Any,
    address: str | None = None,
    ray_module: Any = None,
    llm_module: Any = None,
) -> list[dict[str, Any]]:
    """Generate ``rows`` on Ray Data (``ray.data.llm``'s vLLM engine processor) and return one
    response row per request key, in request order.

    ``on_part(rows)`` is called every ``part_rows`` responses as they stream back (0: never).
    A row the pipeline failed (``should_continue_on_error``) is an error row; if the pipeline
    itself fails, the rows it did not return are error rows naming the failure. A key the
    pipeline returns twice, or one it was not given, raises ``ExchangeError``.
    ``ray_module`` / ``llm_module``: ``ray`` and ``ray.data.llm``, imported here when None.
    """
    if ray_module is None:
        import ray as ray_module  # only in the vLLM venv, with ray[data]
    if llm_module is None:
        from ray.data import llm as llm_module
    if not ray_module.is_initialized():
        ray_module.init(address=address or None)
    config = llm_module.vLLMEngineProcessorConfig(
        model_source=model,
        engine_kwargs=engine_kwargs,
        concurrency=concurrency,
        batch_size=batch_size,
        should_continue_on_error=True,
    )
    # ray >= 2.5x names it build_processor; earlier releases build_llm_processor
    build = getattr(llm_module, "build_processor", None) or llm_module.build_llm_processor
    processor = build(config, preprocess=ray_data_preprocess, postprocess=ray_data_postprocess)
    max_tokens = {str(r["key"]): int(r["max_new_tokens"]) for r in rows}
    by_key: dict[str, dict[str, Any]] = {}
    part: list[dict[str, Any]] = []
    try:
        for out in processor(ray_module.data.from_items([dict(r) for r in rows])).iter_rows():
            key = str(out["key"])
            if key not in max_tokens:
                raise ExchangeError(f"ray.data.llm returned key {key!r}, which was not requested")
            if key in by_key:
                raise ExchangeError(f"ray.data.llm returned key {key!r} twice")
            by_key[key] = response = ray_data_response(out, max_tokens)
            part.append(response)
            if part_rows > 0 and len(part) >= part_rows:
                on_part(part)
                part = []
    except ExchangeError:
        raise
    except Exception as err:  # the pipeline failed: what came back stands, the rest are errors
        for key in max_tokens:
            if key not in by_key:
                by_key[key] = _error_row(
                    key, f"ray.data.llm pipeline failed: {type(err).__name__}: {err}"
                )
                part.append(by_key[key])
    if part_rows > 0 and part:
        on_part(part)
    return [
        by_key.get(str(r["key"])) or _error_row(str(r["key"]), "ray.data.llm returned no row")
        for r in rows
    ]


def _groups(rows: Iterable[dict[str, Any]]) -> dict[str | None, list[dict[str, Any]]]:
    by: dict[str | None, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r.get("adapter"), []).append(r)
    return by


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m ableaudit.backends.vllm_worker",
        description="Generate an ableaudit requests Parquet file with vLLM (offline batch).",
    )
    ap.add_argument("requests", help="requests.parquet written by the audit")
    ap.add_argument("responses", help="where to write responses.parquet")
    ap.add_argument("--model", help="model id or path (default: the file's `model` column)")
    ap.add_argument("--revision", help="model revision (default: the file's `revision` column)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--max-model-len", type=int)
    ap.add_argument("--gpu-memory-utilization", type=float)
    ap.add_argument("--max-lora-rank", type=int, default=64)
    ap.add_argument(
        "--llm-kwargs", default="{}", help="JSON object of extra vllm.LLM(...) arguments"
    )
    ap.add_argument(
        "--part-rows",
        type=int,
        default=0,
        help="also write every N responses to RESPONSES.part-NNNNN as they are done (0: only the full file)",
    )
    ap.add_argument(
        "--engine",
        choices=("llm", "ray-data"),
        default="llm",
        help="llm: one vllm.LLM in this process; ray-data: ray.data.llm's vLLM processor on a Ray cluster",
    )
    ap.add_argument(
        "--ray-address", help="ray-data: the cluster to join (default: RAY_ADDRESS or a local one)"
    )
    ap.add_argument("--ray-concurrency", type=int, default=1, help="ray-data: vLLM replicas")
    ap.add_argument(
        "--ray-batch-size", type=int, default=64, help="ray-data: rows per engine batch"
    )
    ap.add_argument("--validate-only", action="store_true", help="check the requests file and exit")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        rows = read_requests(args.requests)
        extra = json.loads(args.llm_kwargs)
        if not isinstance(extra, dict):
            raise ExchangeError("--llm-kwargs must be a JSON object")
    except (ExchangeError, json.JSONDecodeError) as e:
        print(f"vllm_worker: {e}", file=sys.stderr)
        return 2
    file_model = rows[0]["model"] if rows else args.model
    model = args.model or file_model
    if rows and args.model and args.model != file_model:
        print(
            f"vllm_worker: --model {args.model!r} differs from the requests file's model {file_model!r}",
            file=sys.stderr,
        )
        return 2
    revision = args.revision or (rows[0]["revision"] if rows else None)
    meta = {"ableaudit.model_revision": _resolve_revision(model or "", revision)}
    if args.validate_only:
        print(
            f"vllm_worker: {args.requests} is valid ({len(rows)} requests for {model})",
            file=sys.stderr,
        )
        return 0
    if not rows:
        write_responses(args.responses, [], meta)
        return 0
    if args.engine == "ray-data":
        return _main_ray_data(args, rows, model, revision, meta, extra)

    try:
        import vllm
        from vllm import LLM, SamplingParams
    except Exception as e:
        print(
            f"vllm_worker: cannot import vllm ({type(e).__name__}: {e}); run this worker with the python of a "
            "venv that has vllm installed (pip install vllm pyarrow)",
            file=sys.stderr,
        )
        return 3
    meta["ableaudit.vllm_version"] = getattr(vllm, "__version__", "unknown")

    adapters = sorted({r["adapter"] for r in rows if r.get("adapter")})
    kw: dict[str, Any] = {
        "model": model,
        "revision": revision,
        "dtype": args.dtype,
        "tensor_parallel_size": args.tensor_parallel_size,
    }
    if args.max_model_len:
        kw["max_model_len"] = args.max_model_len
    if args.gpu_memory_utilization:
        kw["gpu_memory_utilization"] = args.gpu_memory_utilization
    if adapters:
        kw.update(
            enable_lora=True, max_loras=max(1, len(adapters)), max_lora_rank=args.max_lora_rank
        )
    kw.update(extra)
    try:
        llm = LLM(**kw)
    except Exception as e:
        print(
            f"vllm_worker: vLLM could not load {model!r}: {type(e).__name__}: {e}", file=sys.stderr
        )
        return 3

    def make_params(r: dict[str, Any]) -> Any:
        constrained = (
            structured_output_kwargs(json.loads(r["json_schema"])) if r.get("json_schema") else {}
        )
        return SamplingParams(
            temperature=float(r["temperature"]),
            top_p=float(r["top_p"]),
            max_tokens=int(r["max_new_tokens"]),
            seed=r.get("seed"),
            **constrained,
        )

    out: list[dict[str, Any]] = []
    step = args.part_rows if args.part_rows > 0 else len(rows)
    parts = 0
    for adapter, group in _groups(rows).items():
        lora = None
        if adapter:
            from vllm.lora.request import LoRARequest

            lora = LoRARequest(
                Path(adapter).name or "adapter", adapters.index(adapter) + 1, adapter
            )
        for start in range(0, len(group), step):
            done = run_batch(llm, group[start : start + step], make_params, lora)
            if args.part_rows > 0:  # the audit lands each part while the rest is generated
                write_responses(f"{args.responses}.part-{parts:05d}", done, meta)
                parts += 1
            out += done
            print(f"vllm_worker: {len(out)}/{len(rows)} done", file=sys.stderr, flush=True)
    write_responses(args.responses, out, meta)
    return 0


def _main_ray_data(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    model: str,
    revision: str | None,
    meta: dict[str, str],
    extra: dict[str, Any],
) -> int:
    """``--engine ray-data``: the whole requests file through Ray Data, parts written as they come."""
    if any(r.get("adapter") for r in rows):
        print(
            "vllm_worker: --engine ray-data does not run adapters (LoRA); use the default engine "
            "for adapter arms",
            file=sys.stderr,
        )
        return 2
    try:
        import ray
        from ray.data import llm as ray_llm
    except Exception as e:
        print(
            f"vllm_worker: --engine ray-data cannot import ray.data.llm ({type(e).__name__}: {e}); "
            "install it in the worker venv: pip install 'ray[data]' vllm pyarrow",
            file=sys.stderr,
        )
        return 3
    meta["ableaudit.vllm_version"] = "ray " + getattr(ray, "__version__", "unknown")
    engine: dict[str, Any] = {
        "dtype": args.dtype,
        "tensor_parallel_size": args.tensor_parallel_size,
    }
    if revision:
        engine["revision"] = revision
    if args.max_model_len:
        engine["max_model_len"] = args.max_model_len
    if args.gpu_memory_utilization:
        engine["gpu_memory_utilization"] = args.gpu_memory_utilization
    engine.update(extra)
    parts = 0

    def on_part(done: list[dict[str, Any]]) -> None:
        nonlocal parts
        write_responses(f"{args.responses}.part-{parts:05d}", done, meta)
        parts += 1
        print(
            f"vllm_worker: part {parts} written ({len(done)} responses)",
            file=sys.stderr,
            flush=True,
        )

    out = run_ray_data(
        rows,
        model=model,
        engine_kwargs=engine,
        concurrency=args.ray_concurrency,
        batch_size=args.ray_batch_size,
        part_rows=args.part_rows,
        on_part=on_part,
        address=args.ray_address,
        ray_module=ray,
        llm_module=ray_llm,
    )
    write_responses(args.responses, out, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
