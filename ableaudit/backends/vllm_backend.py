"""The ``vllm`` backend: hands a batch to the offline vLLM worker in another venv, via Parquet.

See ``ableaudit/backends/vllm_worker.py`` for why, the exchange format and how
to set up the worker venv. Each ``generate()`` call is one worker run, which
loads the model once (tens of seconds to minutes): give it all of a target's
requests at once, not small chunks. The audit flow hands a backend
``target.batch_size`` requests per call, so vllm targets want a large
``batch_size`` (thousands); vLLM schedules the whole file itself.

Failure mapping:
  * no worker configured, or its executable missing -> BackendError on construction;
  * the worker exits without writing a responses file (vLLM not installed,
    model not loadable, bad arguments) -> BackendError with the worker's last
    stderr lines, because every later call would fail the same way;
  * a responses file that is unreadable or breaks the format -> every request
    becomes an error result naming the file and the problem;
  * a key missing from the responses, or a worker run past ``timeout_s`` ->
    error results for those requests. The rest are kept.

options (``target.options``):
  worker_cmd: the command that runs the worker (string or list); default:
              "$ABLEAUDIT_VLLM_PYTHON -m ableaudit.backends.vllm_worker"
  worker_args: extra worker arguments, e.g. ["--tensor-parallel-size", "2"]
  timeout_s: wall-clock limit for one worker run (default: none)
  exchange_dir: keep requests/responses/worker log there (default: a temp dir, removed)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ._common import model_revision_string, normalize_finish_reason, openai_messages
from .base import BackendError, GenerationRequest, GenerationResult

if TYPE_CHECKING:
    from ..config import Target

WORKER_MODULE = "ableaudit.backends.vllm_worker"
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the dir holding `ableaudit/`


def _tail(path: Path, n: int = 20) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no worker log)"
    return "\n".join(lines[-n:]) or "(worker printed nothing)"


class VllmBackend:
    name = "vllm"

    def __init__(self, target: "Target", adapter: str | None = None) -> None:
        opts = dict(target.options or {})
        cmd = opts.get("worker_cmd")
        if not cmd:
            py = os.environ.get("ABLEAUDIT_VLLM_PYTHON")
            if not py:
                raise BackendError(
                    f"target {target.name!r} uses backend vllm but no worker is configured: set env "
                    "ABLEAUDIT_VLLM_PYTHON to the python of a venv with vllm (e.g. /opt/vllm-venv/bin/python) "
                    "or options.worker_cmd; see ableaudit/backends/vllm_worker.py")
            cmd = [py, "-m", WORKER_MODULE]
        self.worker_cmd: list[str] = shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]
        exe = self.worker_cmd[0] if self.worker_cmd else ""
        if not (shutil.which(exe) or Path(exe).is_file()):
            raise BackendError(f"vllm worker executable {exe!r} not found; fix options.worker_cmd or ABLEAUDIT_VLLM_PYTHON")
        self.worker_args = [str(a) for a in opts.get("worker_args", [])]
        self.timeout_s = float(opts["timeout_s"]) if opts.get("timeout_s") else None
        self.exchange_dir = Path(opts["exchange_dir"]) if opts.get("exchange_dir") else None
        self.model = target.model
        self.revision = target.revision
        self.adapter = adapter or target.adapter
        self.model_revision: str | None = model_revision_string(self.model, self.revision, self.adapter)
        self.last_run_dir: Path | None = None

    def _row(self, req: GenerationRequest) -> dict[str, Any]:
        return {
            "key": req.key,
            "messages_json": json.dumps(openai_messages(req), ensure_ascii=False),
            "temperature": max(0.0, float(req.temperature)),
            "top_p": float(req.top_p),
            "max_new_tokens": int(req.max_new_tokens),
            "seed": None if req.seed is None else int(req.seed),
            "model": self.model,
            "revision": self.revision,
            "adapter": self.adapter,
            "json_schema": None if req.json_schema is None else json.dumps(req.json_schema, sort_keys=True),
        }

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        from .vllm_worker import ExchangeError, read_responses, write_requests

        results: dict[str, GenerationResult] = {}
        rows = []
        for req in requests:
            try:
                rows.append(self._row(req))
            except Exception as e:  # e.g. an image in an unknown format
                results[req.key] = GenerationResult.failed(req.key, e)
        if rows:
            if self.exchange_dir is not None:
                run_dir = self.exchange_dir / f"vllm-{uuid.uuid4().hex[:8]}"
                run_dir.mkdir(parents=True, exist_ok=True)
                self._run(rows, run_dir, results, write_requests, read_responses, ExchangeError)
            else:
                with tempfile.TemporaryDirectory(prefix="ableaudit-vllm-") as tmp:
                    self._run(rows, Path(tmp), results, write_requests, read_responses, ExchangeError)
        return [results.get(r.key) or GenerationResult.failed(r.key, "vllm backend lost this request") for r in requests]

    def _run(self, rows: list[dict[str, Any]], run_dir: Path, results: dict[str, GenerationResult],
             write_requests: Any, read_responses: Any, exchange_error: type[Exception]) -> None:
        self.last_run_dir = run_dir
        req_path, resp_path, log_path = run_dir / "requests.parquet", run_dir / "responses.parquet", run_dir / "worker.log"
        try:
            write_requests(req_path, rows)
        except exchange_error as e:  # duplicate keys etc.: a caller bug, but keep every request accounted for
            for r in rows:
                results[r["key"]] = GenerationResult.failed(r["key"], f"cannot write the vllm requests file: {e}")
            return
        argv = [*self.worker_cmd, str(req_path), str(resp_path), "--model", self.model]
        if self.revision:
            argv += ["--revision", self.revision]
        argv += self.worker_args
        env = dict(os.environ)
        # So `-m ableaudit.backends.vllm_worker` resolves in a venv where ableaudit is not installed.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        keys = [r["key"] for r in rows]
        with open(log_path, "wb") as log:
            try:
                proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=self.timeout_s)
                rc: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
            except OSError as e:
                raise BackendError(f"cannot start the vllm worker {argv[0]!r}: {e}; fix options.worker_cmd") from None
        if rc is None and not resp_path.exists():
            for k in keys:
                results[k] = GenerationResult.failed(k, f"vllm worker ran past timeout_s={self.timeout_s:g}s and was killed")
            return
        if not resp_path.exists():
            raise BackendError(f"vllm worker exited with code {rc} without writing {resp_path.name}; "
                               f"its last output:\n{_tail(log_path)}\n(command: {shlex.join(argv)})")
        try:
            resp_rows, meta = read_responses(resp_path)
        except exchange_error as e:
            msg = f"vllm worker (exit code {rc}) wrote an invalid responses file: {e}"
            for k in keys:
                results[k] = GenerationResult.failed(k, msg)
            return
        if meta.get("ableaudit.model_revision"):
            rev = meta["ableaudit.model_revision"]
            if self.adapter and "+adapter:" in (self.model_revision or ""):
                rev += "+adapter:" + self.model_revision.split("+adapter:", 1)[1]  # type: ignore[union-attr]
            self.model_revision = rev
        wanted = set(keys)
        for r in resp_rows:
            k = r["key"]
            if k not in wanted:
                continue
            if r["status"] == "error":
                results[k] = GenerationResult(key=k, status="error", error=r.get("error") or "vllm worker error",
                                              latency_ms=r.get("latency_ms"))
            else:
                results[k] = GenerationResult.from_text(
                    k, r.get("text"), finish_reason=normalize_finish_reason(r.get("finish_reason")),
                    prompt_tokens=r.get("prompt_tokens"), completion_tokens=r.get("completion_tokens"),
                    latency_ms=r.get("latency_ms"))
        missing = [k for k in keys if k not in results]
        if missing:
            msg = (f"vllm worker (exit code {rc}) returned no response for this key "
                   f"({len(missing)} of {len(keys)} missing); its last output:\n{_tail(log_path, 8)}")
            for k in missing:
                results[k] = GenerationResult.failed(k, msg)

    def close(self) -> None:
        """Nothing held between calls: each generate() is its own worker process."""
