"""Requests per second through the openai backend: one server against replicas of it, side by side.

Why: a target's `base_url` may list replicas of one model (one `vllm serve` per
GPU); the backend keeps `batch_size` requests in flight on each and sends each
request to the least busy replica. This measures what that buys, on local
HTTP servers that behave like an inference server with a fixed capacity: each
answers at most `--capacity` requests at once (the rest queue) and spends
`--latency` seconds on a request on average (0.25x to 1.75x, fixed per request,
as answers differ in length), scaled by its slowness.

  one server                   the baseline (1.00x)
  ... in batches               the same, requests handed over in `generate` calls of batch_size,
                               each call waiting for its slowest answer (the flow before streaming)
  2 replicas, equal            ideally 2x
  2 replicas, one 4x slower    least-busy dispatch (the backend)
  ... split evenly             the same two replicas, half the requests each (round robin): the slow one sets the pace
  ... in batches               the same two replicas, requests handed over in `generate` calls of
                               2 x batch_size, each call waiting for its slowest answer

Every run sends the same requests and checks that every answer came back in
order. Nothing here needs a GPU or a model: it measures the client side.

    .venv/bin/python bench/serving.py
    .venv/bin/python bench/serving.py --requests 400 --capacity 16 --latency 0.05 --batch 16
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL = "bench-model"


class CapacityServer:
    """An OpenAI-compatible echo server that works on at most `capacity` requests at once."""

    def __init__(self, capacity: int, latency_s: float, slowness: float = 1.0) -> None:
        self.slots = threading.BoundedSemaphore(capacity)
        self.seconds = latency_s * slowness
        self.answered = 0
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send(
                    {
                        "object": "list",
                        "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "b"}],
                    }
                )

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                # answers differ in length: 0.25x to 1.75x the mean time, fixed per request
                u = (
                    int(
                        hashlib.sha256(payload["messages"][-1]["content"].encode()).hexdigest()[:8],
                        16,
                    )
                    / 0xFFFFFFFF
                )
                with server.slots:
                    time.sleep(server.seconds * (0.25 + 1.5 * u))
                with lock:
                    server.answered += 1
                text = "echo: " + payload["messages"][-1]["content"]
                self._send(
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "created": 0,
                        "model": MODEL,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": text},
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _backend(urls: list[str], batch: int):
    from ableaudit.backends import make_backend
    from ableaudit.config import Target

    return make_backend(
        Target(
            name="bench",
            backend="openai",
            model=MODEL,
            base_url=urls,
            batch_size=batch,
            api_key_env="ABLEAUDIT_BENCH_NO_KEY",
        )
    )


def _requests(n: int):
    from ableaudit.records import GenerationRequest

    return [
        GenerationRequest(
            key=f"r{i}", messages=({"role": "user", "content": f"question {i}"},), max_new_tokens=8
        )
        for i in range(n)
    ]


def _check(results, requests) -> None:
    bad = [
        r.key
        for r, q in zip(results, requests)
        if r.key != q.key or r.status != "ok" or r.text != "echo: " + q.messages[-1]["content"]
    ]
    if bad:
        raise SystemExit(f"answers lost or out of order: {bad[:5]}")


def run(urls: list[str], args: argparse.Namespace, batches: bool = False) -> float:
    """Seconds for all requests through one backend over `urls`, as the audit flow hands them over
    (``results_in_batches``: streamed); ``batches``: in ``generate`` calls of the backend's concurrency
    instead, each waiting for its slowest answer (how the flow worked before streaming)."""
    from ableaudit.backends.base import results_in_batches

    backend = _backend(urls, args.batch)
    reqs = _requests(args.requests)
    size = backend.concurrency
    t0 = time.perf_counter()
    if batches:
        results = [
            r
            for start in range(0, len(reqs), size)
            for r in backend.generate(reqs[start : start + size])
        ]
    else:
        got = {r.key: r for batch in results_in_batches(backend, reqs, size) for r in batch}
        results = [got[q.key] for q in reqs]
    seconds = time.perf_counter() - t0
    backend.close()
    _check(results, reqs)
    return seconds


def run_split(urls: list[str], args: argparse.Namespace) -> float:
    """Round robin: each replica its own backend and an equal share of the requests, all at once."""
    reqs = _requests(args.requests)
    shares = [reqs[i :: len(urls)] for i in range(len(urls))]
    backends = [_backend([u], args.batch) for u in urls]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(urls)) as pool:
        parts = list(pool.map(lambda bs: bs[0].generate(bs[1]), zip(backends, shares)))
    seconds = time.perf_counter() - t0
    for b, share, part in zip(backends, shares, parts):
        b.close()
        _check(part, share)
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--capacity", type=int, default=8, help="requests a server works on at once")
    ap.add_argument(
        "--latency", type=float, default=0.05, help="seconds a server spends on one request"
    )
    ap.add_argument(
        "--batch",
        type=int,
        default=8,
        help="the target's batch_size: requests in flight per replica",
    )
    ap.add_argument("--slow", type=float, default=4.0, help="how much slower the slow replica is")
    args = ap.parse_args()

    servers = [CapacityServer(args.capacity, args.latency) for _ in range(2)]
    slow = CapacityServer(args.capacity, args.latency, slowness=args.slow)
    try:
        rows = [("one server", run([servers[0].url], args))]
        rows.append(
            ("... in batches, each awaiting its slowest", run([servers[0].url], args, batches=True))
        )
        rows.append(("2 replicas, equal", run([s.url for s in servers], args)))
        before = (servers[0].answered, slow.answered)
        rows.append(
            (f"2 replicas, one {args.slow:g}x slower", run([servers[0].url, slow.url], args))
        )
        share = (servers[0].answered - before[0], slow.answered - before[1])
        rows.append(("... split evenly (round robin)", run_split([servers[0].url, slow.url], args)))
        rows.append(
            (
                "... in batches, each awaiting its slowest",
                run([servers[0].url, slow.url], args, batches=True),
            )
        )
    finally:
        for s in (*servers, slow):
            s.close()
    base = rows[0][1]
    print(
        f"{args.requests} requests, batch_size {args.batch} per replica, server capacity {args.capacity}, "
        f"{args.latency * 1000:.0f} ms a request"
    )
    print(f"{'':44s} {'seconds':>8s} {'req/s':>8s} {'vs one server':>14s}")
    for name, seconds in rows:
        print(f"{name:44s} {seconds:8.2f} {args.requests / seconds:8.1f} {base / seconds:13.2f}x")
    print(
        f"least-busy dispatch sent {share[0]} requests to the fast replica and {share[1]} to the slow one"
    )


if __name__ == "__main__":
    main()
