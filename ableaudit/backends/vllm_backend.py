"""The ``vllm`` backend: hands a batch to the offline vLLM worker in another venv, via Parquet.

See ``ableaudit/backends/vllm_worker.py`` for why, the exchange format and how
to set up the worker venv. One worker run loads the model once (tens of
seconds to minutes) and generates every request it is given. The audit flow and
the judges hand it all of a target's pending requests at once (``stream``); the
worker writes its responses ``part_rows`` at a time (default: the target's
``batch_size``), and each part lands while the worker goes on, so a long run
lands progressively and a crash or kill loses only the part in progress.
``generate()`` is the same run with its results returned in order. Each answered
result carries the revision the worker reports in its responses' metadata (the
model at the commit it loaded, plus the adapter).

Failure mapping:
  * no worker configured, or its executable missing -> BackendError on construction;
  * the worker exits without writing a responses file or any part (vLLM not
    installed, model not loadable, bad arguments) -> BackendError with the
    worker's last stderr lines, because every later call would fail the same way;
    a worker that dies after some parts -> error results for the rest, with its
    last lines;
  * a responses file that is unreadable or breaks the format -> every request
    becomes an error result naming the file and the problem;
  * a key missing from the responses, or a worker run past ``timeout_s`` ->
    error results for those requests. The rest are kept.

options (``target.options``):
  worker_cmd: the command that runs the worker (string or list); default:
              "$ABLEAUDIT_VLLM_PYTHON -m ableaudit.backends.vllm_worker"
  worker_args: extra worker arguments, e.g. ["--tensor-parallel-size", "2"]
  timeout_s: wall-clock limit for one worker run (default: none)
  part_rows: responses per part file (default: the target's batch_size)
  poll_s: how often to look for new parts (default 0.5 s)
  exchange_dir: keep requests/responses/worker log there (default: a temp dir, removed)
  engine: "llm" (default: one vllm.LLM in the worker process) or "ray-data" (the worker runs
          ray.data.llm's vLLM processor over a Ray cluster; docs/scale-out.md)
  ray_address: ray-data: the Ray cluster to join (default: RAY_ADDRESS, else a local one)
  ray_concurrency: ray-data: vLLM replicas across the cluster (default 1)
  ray_batch_size: ray-data: rows per engine batch (default 64)
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import model_revision_string, normalize_finish_reason, openai_messages
from .base import (
    Backend,
    BackendError,
    GenerationCancelled,
    GenerationRequest,
    GenerationResult,
)

if TYPE_CHECKING:
    from ..target import Target

log = logging.getLogger(__name__)

WORKER_MODULE = "ableaudit.backends.vllm_worker"
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the dir holding `ableaudit/`


def _tail(path: Path, n: int = 20) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no worker log)"
    return "\n".join(lines[-n:]) or "(worker printed nothing)"


class VllmBackend(Backend):
    name = "vllm"
    supports_stream = True
    supports_json_schema = True  # vLLM's structured outputs in the worker
    json_schema_by_default = True
    supports_images = False  # vision targets: `vllm serve` and backend openai

    def __init__(self, target: Target, adapter: str | None = None) -> None:
        opts = dict(target.options or {})
        cmd = opts.get("worker_cmd")
        if not cmd:
            py = os.environ.get("ABLEAUDIT_VLLM_PYTHON")
            if not py:
                raise BackendError(
                    f"target {target.name!r} uses backend vllm but no worker is configured: set env "
                    "ABLEAUDIT_VLLM_PYTHON to the python of a venv with vllm (e.g. /opt/vllm-venv/bin/python) "
                    "or options.worker_cmd; see ableaudit/backends/vllm_worker.py"
                )
            cmd = [py, "-m", WORKER_MODULE]
        self.worker_cmd: list[str] = (
            shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]
        )
        exe = self.worker_cmd[0] if self.worker_cmd else ""
        if not (shutil.which(exe) or Path(exe).is_file()):
            raise BackendError(
                f"vllm worker executable {exe!r} not found; fix options.worker_cmd or ABLEAUDIT_VLLM_PYTHON"
            )
        self.worker_args = [str(a) for a in opts.get("worker_args", [])]
        self.worker_args += _engine_args(target.name, opts)
        self.timeout_s = float(opts["timeout_s"]) if opts.get("timeout_s") else None
        self.exchange_dir = Path(opts["exchange_dir"]) if opts.get("exchange_dir") else None
        self.model = target.model
        self.revision = target.revision
        self.adapter = adapter or target.adapter
        self.model_revision: str | None = model_revision_string(
            self.model, self.revision, self.adapter
        )
        self.last_run_dir: Path | None = None
        # responses per part file: results land this many at a time while the worker runs
        self.part_rows = int(opts.get("part_rows", target.batch_size))
        self.concurrency = int(target.batch_size)  # results land this many at a time
        self.poll_s = float(opts.get("poll_s", 0.5))

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
            "json_schema": None
            if req.json_schema is None
            else json.dumps(req.json_schema, sort_keys=True),
        }

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """One worker run over ``requests``; results in request order."""
        got = {r.key: r for r in self.stream(requests)}
        return [
            got.get(r.key) or GenerationResult.failed(r.key, "vllm backend lost this request")
            for r in requests
        ]

    def stream(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """One worker run over all ``requests`` (one model load); results as its parts arrive.

        The worker writes ``part_rows`` responses at a time (``responses.parquet.part-NNNNN``);
        each part is read and handed back while the worker goes on, so an audit lands
        progressively and a crash or a kill loses only the part in progress.
        """
        from .vllm_worker import ExchangeError, write_requests

        rows = []
        for req in requests:
            try:
                rows.append(self._row(req))
            except Exception as e:  # e.g. an image in an unknown format: never sent
                yield GenerationResult.failed(req.key, e)
        if not rows:
            return
        if self.exchange_dir is not None:
            run_dir = self.exchange_dir / f"vllm-{uuid.uuid4().hex[:8]}"
            run_dir.mkdir(parents=True, exist_ok=True)
        else:
            run_dir = Path(tempfile.mkdtemp(prefix="ableaudit-vllm-"))
        self.last_run_dir = run_dir
        try:
            try:
                write_requests(run_dir / "requests.parquet", rows)
            except (
                ExchangeError
            ) as e:  # duplicate keys etc.: a caller bug, but keep every request accounted for
                for r in rows:
                    yield GenerationResult.failed(
                        r["key"], f"cannot write the vllm requests file: {e}"
                    )
                return
            yield from self._run(run_dir, [r["key"] for r in rows])
        finally:
            if self.exchange_dir is None:
                shutil.rmtree(run_dir, ignore_errors=True)

    def _run(self, run_dir: Path, keys: list[str]) -> Iterator[GenerationResult]:
        from .vllm_worker import ExchangeError, read_responses

        req_path, resp_path, log_path = (
            run_dir / "requests.parquet",
            run_dir / "responses.parquet",
            run_dir / "worker.log",
        )
        argv = [*self.worker_cmd, str(req_path), str(resp_path), "--model", self.model]
        if self.revision:
            argv += ["--revision", self.revision]
        argv += [*self.worker_args, "--part-rows", str(self.part_rows)]
        env = dict(os.environ)
        # So `-m ableaudit.backends.vllm_worker` resolves in a venv where ableaudit is not installed.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH")) if p
        )
        wanted, done = set(keys), set()
        seen_parts: set[Path] = set()

        def results_of(path: Path) -> list[GenerationResult]:
            resp_rows, meta = read_responses(path)
            revision = self._note_revision(meta)
            fresh = [r for r in resp_rows if r["key"] in wanted and r["key"] not in done]
            done.update(r["key"] for r in fresh)
            return [_result(r, revision) for r in fresh]

        def new_parts() -> Iterator[GenerationResult]:
            for part in sorted(run_dir.glob(resp_path.name + ".part-*")):
                if part in seen_parts or part.name.endswith(".tmp"):
                    continue
                seen_parts.add(part)
                try:
                    yield from results_of(part)
                except (
                    ExchangeError
                ) as e:  # a broken part: the full file at the end may still cover it
                    log.warning(
                        "vllm worker part %s unreadable (%s); waiting for the full responses file",
                        part.name,
                        e,
                    )

        with open(log_path, "wb") as worker_log:
            try:
                proc = subprocess.Popen(argv, stdout=worker_log, stderr=subprocess.STDOUT, env=env)
            except OSError as e:
                raise BackendError(
                    f"cannot start the vllm worker {argv[0]!r}: {e}; fix options.worker_cmd"
                ) from None
            deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
            timed_out = False
            try:
                while True:
                    try:
                        proc.wait(timeout=self.poll_s)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    yield from new_parts()
                    if self.cancelled:  # the finally below ends the worker; its parts are back
                        raise GenerationCancelled()
                    if deadline is not None and time.monotonic() > deadline:
                        timed_out = True
                        proc.kill()
                        proc.wait()
                        break
            finally:
                if (
                    proc.poll() is None
                ):  # the consumer stopped early: the worker's results have nowhere to go
                    proc.kill()
                    proc.wait()
        rc = proc.returncode
        yield from new_parts()
        if timed_out:
            msg = f"vllm worker ran past timeout_s={self.timeout_s:g}s and was killed"
            yield from (GenerationResult.failed(k, msg) for k in keys if k not in done)
            return
        if resp_path.exists():
            try:
                yield from results_of(resp_path)
            except ExchangeError as e:
                msg = f"vllm worker (exit code {rc}) wrote an invalid responses file: {e}"
                yield from (GenerationResult.failed(k, msg) for k in keys if k not in done)
                return
        elif not done:
            raise BackendError(
                f"vllm worker exited with code {rc} without writing {resp_path.name}; "
                f"its last output:\n{_tail(log_path)}\n(command: {shlex.join(argv)})"
            )
        missing = [k for k in keys if k not in done]
        if missing:
            how = "stopped" if not resp_path.exists() else "returned no response for this key"
            msg = (
                f"vllm worker (exit code {rc}) {how} ({len(missing)} of {len(keys)} missing); "
                f"its last output:\n{_tail(log_path, 8)}"
            )
            yield from (GenerationResult.failed(k, msg) for k in missing)

    def _note_revision(self, meta: dict[str, str]) -> str | None:
        """The revision a responses file says the worker loaded (with this backend's adapter), kept as the
        backend's own; the one the backend resolved itself when the file names none."""
        if meta.get("ableaudit.model_revision"):
            rev = meta["ableaudit.model_revision"]
            if self.adapter and "+adapter:" in (self.model_revision or ""):
                rev += "+adapter:" + self.model_revision.split("+adapter:", 1)[1]  # type: ignore[union-attr]
            self.model_revision = rev
        return self.model_revision

    def close(self) -> None:
        """Nothing held between calls: each run is its own worker process (stopped when its stream closes)."""


ENGINES = ("llm", "ray-data")


def _engine_args(name: str, opts: dict[str, Any]) -> list[str]:
    """The worker arguments of ``options.engine`` and its ``ray_*`` options."""
    engine = opts.get("engine", "llm")
    if engine not in ENGINES:
        raise BackendError(
            f"target {name!r}: options.engine is {engine!r}; it must be one of {', '.join(ENGINES)}"
        )
    given = {
        "ray_address": opts.get("ray_address"),
        "ray_concurrency": opts.get("ray_concurrency"),
        "ray_batch_size": opts.get("ray_batch_size"),
    }
    ray = {k: v for k, v in given.items() if v is not None}
    if engine == "llm":
        if ray:
            raise BackendError(
                f"target {name!r}: options {', '.join(ray)} apply to engine ray-data; set "
                "options.engine: ray-data or remove them"
            )
        return []
    args = ["--engine", "ray-data"]
    for key, value in ray.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    return args


def _result(r: dict[str, Any], revision: str | None) -> GenerationResult:
    """A response row as a result; an answered one carries the revision the worker reported."""
    if r["status"] == "error":
        return GenerationResult(
            key=r["key"],
            status="error",
            error=r.get("error") or "vllm worker error",
            latency_ms=r.get("latency_ms"),
        )
    return GenerationResult.from_text(
        r["key"],
        r.get("text"),
        finish_reason=normalize_finish_reason(r.get("finish_reason")),
        prompt_tokens=r.get("prompt_tokens"),
        completion_tokens=r.get("completion_tokens"),
        latency_ms=r.get("latency_ms"),
        model_revision=revision,
    )
