"""The vllm backend's Parquet exchange, without vLLM.

Three layers: the file format and its validation; the backend driving fake
worker scripts (good, partial, broken, crashing, hanging); and the real worker
module's ``main`` run as a subprocess against a stand-in ``vllm`` package, so
the code that will run on the GPU box is exercised end to end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ableaudit.backends import BackendError, make_backend
from ableaudit.backends.vllm_worker import (
    REQUEST_SCHEMA,
    RESPONSE_SCHEMA,
    ExchangeError,
    read_requests,
    read_responses,
    write_requests,
    write_responses,
)
from ableaudit.config import Target
from ableaudit.records import GenerationRequest

ROOT = Path(__file__).resolve().parents[3]

WORKER = ROOT / "ableaudit" / "backends" / "vllm_worker.py"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def _row(key: str, **kw) -> dict:
    row = {
        "key": key,
        "messages_json": json.dumps([{"role": "user", "content": f"q {key}"}]),
        "temperature": 0.1,
        "top_p": 1.0,
        "max_new_tokens": 16,
        "seed": 0,
        "model": "org/m",
        "revision": None,
        "adapter": None,
        "json_schema": None,
    }
    row.update(kw)
    return row


def _req(key: str, text: str, **kw) -> GenerationRequest:
    return GenerationRequest(
        key=key,
        messages=(
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": text},
        ),
        **kw,
    )


# ---------------------------------------------------------------- (a) the format


def test_requests_round_trip_and_schema(tmp_path):
    rows = [
        _row("a"),
        _row("b", seed=None, adapter="/lora/x", temperature=0.0, json_schema='{"type": "object"}'),
    ]
    p = write_requests(tmp_path / "req.parquet", rows)
    schema = pq.read_schema(p)
    assert schema.names == REQUEST_SCHEMA.names
    assert (
        schema.field("max_new_tokens").type == pa.int64()
        and schema.field("seed").type == pa.int64()
    )
    assert schema.metadata[b"ableaudit.exchange"] == b"vllm-requests/1"
    assert read_requests(p) == rows
    assert not list(tmp_path.glob(".*tmp"))  # atomic write leaves no temp file


@pytest.mark.parametrize(
    "bad, message",
    [
        ([_row("a"), _row("a")], "duplicate keys"),
        ([_row("a", temperature=-1.0)], "temperature"),
        ([_row("a", top_p=0.0)], "top_p"),
        ([_row("a", max_new_tokens=0)], "max_new_tokens"),
        ([_row("a", messages_json="{not json")], "not JSON"),
        ([_row("a", messages_json=json.dumps([{"content": "no role"}]))], "role, content"),
        ([_row("a"), _row("b", model="org/other")], "one model"),
        ([_row("a", json_schema="[1, 2]")], "json_schema must be a JSON object"),
        ([_row("")], "null/empty"),
    ],
)
def test_invalid_requests_are_rejected(tmp_path, bad, message):
    with pytest.raises(ExchangeError, match=message):
        write_requests(tmp_path / "req.parquet", bad)


def test_foreign_or_broken_request_files(tmp_path):
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(ExchangeError, match="not a readable Parquet"):
        read_requests(junk)
    partial = tmp_path / "partial.parquet"
    pq.write_table(pa.table({"key": ["a"], "messages_json": ["[]"]}), partial)
    with pytest.raises(ExchangeError, match=r"lacks column\(s\) \['temperature'"):
        read_requests(partial)
    wrong = tmp_path / "wrong.parquet"
    t = pa.Table.from_pylist([_row("a")], schema=REQUEST_SCHEMA).set_column(
        4, "max_new_tokens", pa.array(["many"])
    )
    pq.write_table(t, wrong)
    with pytest.raises(ExchangeError, match="wrong type"):
        read_requests(wrong)
    with pytest.raises(ExchangeError, match="does not exist"):
        read_requests(tmp_path / "absent.parquet")


def test_responses_round_trip_and_validation(tmp_path):
    rows = [
        {
            "key": "a",
            "status": "ok",
            "text": "hi",
            "finish_reason": "stop",
            "error": None,
            "prompt_tokens": 5,
            "completion_tokens": 2,
            "latency_ms": 1.5,
        },
        {
            "key": "b",
            "status": "error",
            "text": None,
            "finish_reason": None,
            "error": "boom",
            "prompt_tokens": None,
            "completion_tokens": None,
            "latency_ms": None,
        },
    ]
    p = write_responses(tmp_path / "resp.parquet", rows, {"ableaudit.model_revision": "org/m@abc"})
    assert pq.read_schema(p).names == RESPONSE_SCHEMA.names
    got, meta = read_responses(p)
    assert got == rows
    assert meta == {
        "ableaudit.exchange": "vllm-responses/1",
        "ableaudit.model_revision": "org/m@abc",
    }
    with pytest.raises(ExchangeError, match="status 'done'"):
        write_responses(tmp_path / "r2.parquet", [dict(rows[0], status="done")])
    with pytest.raises(ExchangeError, match="text is null"):
        write_responses(tmp_path / "r3.parquet", [dict(rows[0], text=None)])


# ---------------------------------------------------------------- (b) backend + fake worker scripts

FAKE_WORKER = textwrap.dedent("""
    import json, os, sys, time, pyarrow as pa, pyarrow.parquet as pq
    req, resp = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    mode = "{mode}"
    rows = pq.read_table(req).to_pylist()
    print("fake worker got", len(rows), "rows; args", args, file=sys.stderr)
    if mode == "crash":
        print("torch.OutOfMemoryError: CUDA out of memory", file=sys.stderr)
        sys.exit(1)
    if mode == "hang":
        time.sleep(30)
    if mode == "garbage":
        open(resp, "wb").write(b"\\x00garbage")
        sys.exit(0)
    out = []
    for r in rows:
        user = json.loads(r["messages_json"])[-1]["content"]
        if isinstance(user, list):
            user = " ".join(p.get("text", "<image>") for p in user)
        out.append({{"key": r["key"], "status": "ok", "text": "vllm says: " + user, "finish_reason": "length",
                    "error": None, "prompt_tokens": 7, "completion_tokens": int(r["max_new_tokens"]),
                    "latency_ms": 12.5}})
    if mode == "partial":
        out = out[::2]
    if mode == "badstatus":
        out[0]["status"] = "finished"
    schema = pa.schema([("key", pa.string()), ("status", pa.string()), ("text", pa.string()),
                        ("finish_reason", pa.string()), ("error", pa.string()), ("prompt_tokens", pa.int64()),
                        ("completion_tokens", pa.int64()), ("latency_ms", pa.float64())],
                       metadata={{"ableaudit.exchange": "vllm-responses/1",
                                 "ableaudit.model_revision": "org/m@" + "f" * 40}})
    if mode in ("midway", "hang_after_part"):  # one part of two rows, then it dies or hangs
        # written under a temporary name and renamed, as the real worker does
        pq.write_table(pa.Table.from_pylist(out[:2], schema=schema), resp + ".tmp")
        os.replace(resp + ".tmp", resp + ".part-00000")
        if mode == "hang_after_part":
            time.sleep(60)
        print("Segmentation fault in the engine", file=sys.stderr)
        sys.exit(139)
    pq.write_table(pa.Table.from_pylist(out, schema=schema), resp)
""")


def _fake_backend(tmp_path: Path, mode: str, **opts) -> object:
    script = tmp_path / f"fake_worker_{mode}.py"
    script.write_text(FAKE_WORKER.format(mode=mode))
    options = {
        "worker_cmd": [sys.executable, str(script)],
        "exchange_dir": str(tmp_path / "x"),
        **opts,
    }
    return make_backend(
        Target(name="v", backend="vllm", model="org/m", revision="main", options=options)
    )


def test_backend_round_trip_with_fake_worker(tmp_path):
    b = _fake_backend(tmp_path, "ok", worker_args=["--tensor-parallel-size", "2"])
    reqs = [
        _req("k1", "first", seed=3, max_new_tokens=5),
        _req("k2", "second", seed=None, temperature=0.0),
        _req("k3", "picture", images=(PNG,)),
        _req("k4", "bad image", images=(b"nope",)),
    ]
    res = b.generate(reqs)
    assert [r.key for r in res] == ["k1", "k2", "k3", "k4"]
    assert res[0].text == "vllm says: first" and res[0].status == "ok"
    assert (
        res[0].finish_reason,
        res[0].prompt_tokens,
        res[0].completion_tokens,
        res[0].latency_ms,
    ) == ("length", 7, 5, 12.5)
    assert res[1].text == "vllm says: second"
    assert res[2].text == "vllm says: picture <image>"
    assert res[3].status == "error" and "PNG, JPEG" in res[3].error
    assert b.model_revision == "org/m@" + "f" * 40
    # each answered result names what the worker says it loaded (not what the backend resolved before)
    assert [r.model_revision for r in res] == ["org/m@" + "f" * 40] * 3 + [None]
    # what the worker was given
    written = read_requests(b.last_run_dir / "requests.parquet")
    assert [r["key"] for r in written] == ["k1", "k2", "k3"]
    r1, r2, r3 = written
    assert json.loads(r1["messages_json"])[0] == {
        "role": "system",
        "content": "You are a helpful assistant.",
    }
    assert (
        r1["seed"],
        r1["max_new_tokens"],
        r1["model"],
        r1["revision"],
        r2["seed"],
        r2["temperature"],
    ) == (3, 5, "org/m", "main", None, 0.0)
    parts = json.loads(r3["messages_json"])[1]["content"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    log = (b.last_run_dir / "worker.log").read_text()
    assert "--model', 'org/m', '--revision', 'main', '--tensor-parallel-size', '2'" in log


def test_partial_responses_become_error_results(tmp_path):
    b = _fake_backend(tmp_path, "partial")
    res = b.generate([_req(f"k{i}", f"q{i}") for i in range(4)])
    assert [r.status for r in res] == ["ok", "error", "ok", "error"]
    assert "returned no response for this key (2 of 4 missing)" in res[1].error


@pytest.mark.parametrize(
    "mode, message", [("garbage", "not a readable Parquet"), ("badstatus", "status 'finished'")]
)
def test_broken_response_file_makes_every_request_an_error(tmp_path, mode, message):
    b = _fake_backend(tmp_path, mode)
    res = b.generate([_req("a", "x"), _req("b", "y")])
    assert [r.status for r in res] == ["error", "error"]
    assert all("invalid responses file" in r.error and message in r.error for r in res)


def test_crashing_worker_raises_with_its_output(tmp_path):
    b = _fake_backend(tmp_path, "crash")
    with pytest.raises(BackendError, match="exited with code 1") as e:
        b.generate([_req("a", "x")])
    assert "CUDA out of memory" in str(e.value)


def test_worker_timeout_gives_error_results(tmp_path):
    b = _fake_backend(tmp_path, "hang", timeout_s=1)
    res = b.generate([_req("a", "x")])
    assert res[0].status == "error" and "timeout_s=1s" in res[0].error


def test_a_worker_dying_after_a_part_keeps_the_part_and_errors_the_rest(tmp_path):
    b = _fake_backend(tmp_path, "midway", poll_s=0.05)
    res = b.generate([_req(f"k{i}", f"q{i}") for i in range(4)])
    assert [r.status for r in res] == ["ok", "ok", "error", "error"]
    assert res[0].text == "vllm says: q0"
    assert (
        "exit code 139) stopped (2 of 4 missing)" in res[2].error
        and "Segmentation fault" in res[2].error
    )


def test_closing_the_stream_stops_the_worker(tmp_path):
    b = _fake_backend(tmp_path, "hang_after_part", poll_s=0.05)
    t0 = time.perf_counter()
    stream = b.stream([_req(f"k{i}", f"q{i}") for i in range(4)])
    first = next(stream)
    stream.close()  # e.g. landing failed: the worker must not run on with nowhere to put its results
    assert first.key == "k0" and first.status == "ok"
    assert time.perf_counter() - t0 < 30  # the worker would hang 60 s


def test_worker_configuration_errors(monkeypatch):
    monkeypatch.delenv("ABLEAUDIT_VLLM_PYTHON", raising=False)
    with pytest.raises(BackendError, match="ABLEAUDIT_VLLM_PYTHON"):
        make_backend(Target(name="v", backend="vllm", model="org/m"))
    monkeypatch.setenv("ABLEAUDIT_VLLM_PYTHON", "/nonexistent/venv/bin/python")
    with pytest.raises(BackendError, match="not found"):
        make_backend(Target(name="v", backend="vllm", model="org/m"))


# ---------------------------------------------------------------- (c) the real worker against a stand-in vllm

FAKE_VLLM = {
    "vllm/__init__.py": textwrap.dedent("""
        import json, os
        __version__ = "0.0-fake"

        class SamplingParams:
            def __init__(self, temperature=1.0, top_p=1.0, max_tokens=16, seed=None, structured_outputs=None):
                self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
                if structured_outputs is not None:
                    self.json_schema = structured_outputs.json

        class _Completion:
            def __init__(self, text, n, reason):
                self.text, self.token_ids, self.finish_reason = text, list(range(n)), reason

        class _Output:
            def __init__(self, prompt_len, comp):
                self.prompt_token_ids, self.outputs = list(range(prompt_len)), [comp]

        class LLM:
            def __init__(self, **kw):
                self.log = os.environ["FAKE_VLLM_LOG"]
                with open(self.log, "a") as f:
                    f.write(json.dumps({"init": kw}) + "\\n")

            def chat(self, convs, params, use_tqdm=True, lora_request=None):
                import time
                time.sleep(float(os.environ.get("FAKE_VLLM_DELAY", "0")))
                with open(self.log, "a") as f:
                    f.write(json.dumps({"chat": len(convs), "lora": getattr(lora_request, "path", None),
                                        "params": [vars(p) for p in params]}) + "\\n")
                if any("TOO_LONG" in json.dumps(c) for c in convs):
                    raise ValueError("prompt is longer than max_model_len")
                out = []
                for c, p in zip(convs, params):
                    user = c[-1]["content"]
                    words = user.split()
                    tag = "[lora] " if lora_request else ""
                    text = tag + user[::-1]
                    if hasattr(p, "json_schema"):  # constrained: an object with the schema's required keys
                        text = json.dumps({k: "x" for k in p.json_schema.get("required", [])})
                    out.append(_Output(len(json.dumps(c).split()),
                                       _Completion(text, min(len(words), p.max_tokens),
                                                   "length" if len(words) > p.max_tokens else "stop")))
                return out
    """),
    "vllm/sampling_params.py": textwrap.dedent("""
        class StructuredOutputsParams:
            def __init__(self, json=None):
                self.json = json
    """),
    "vllm/lora/__init__.py": "",
    "vllm/lora/request.py": textwrap.dedent("""
        class LoRARequest:
            def __init__(self, name, int_id, path):
                self.name, self.int_id, self.path = name, int_id, path
    """),
}


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    root = tmp_path / "fake_site"
    for rel, src in FAKE_VLLM.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(src)
    log = tmp_path / "vllm_calls.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(root))
    monkeypatch.setenv("FAKE_VLLM_LOG", str(log))
    monkeypatch.setenv("ABLEAUDIT_VLLM_PYTHON", sys.executable)
    return log


def test_real_worker_module_end_to_end(fake_vllm, tmp_path):
    b = make_backend(
        Target(
            name="v",
            backend="vllm",
            model="org/m",
            revision="a" * 40,
            options={
                "worker_args": ["--max-model-len", "4096"],
                "exchange_dir": str(tmp_path / "x"),
            },
        )
    )
    reqs = [
        _req("a", "one two three", temperature=0.0, max_new_tokens=2),
        _req("b", "TOO_LONG prompt", temperature=0.5, seed=9),
        _req("c", "short", temperature=0.7, top_p=0.8, seed=1, max_new_tokens=8),
    ]
    res = b.generate(reqs)
    assert [r.key for r in res] == ["a", "b", "c"]
    assert (res[0].text, res[0].finish_reason, res[0].completion_tokens) == (
        "eerht owt eno",
        "length",
        2,
    )
    assert res[1].status == "error" and "max_model_len" in res[1].error  # only the bad row fails
    assert (res[2].text, res[2].finish_reason) == ("trohs", "stop")
    assert b.model_revision == "org/m@" + "a" * 40
    assert [r.model_revision for r in res] == ["org/m@" + "a" * 40, None, "org/m@" + "a" * 40]
    calls = [json.loads(line) for line in fake_vllm.read_text().splitlines()]
    assert calls[0]["init"] == {
        "model": "org/m",
        "revision": "a" * 40,
        "dtype": "auto",
        "tensor_parallel_size": 1,
        "max_model_len": 4096,
    }
    assert [c["chat"] for c in calls[1:]] == [
        3,
        1,
        1,
        1,
    ]  # one batch, then one by one after its failure
    assert calls[1]["params"][2] == {"temperature": 0.7, "top_p": 0.8, "max_tokens": 8, "seed": 1}
    assert calls[1]["params"][0]["seed"] is None


def test_real_worker_writes_parts_that_land_while_it_runs(fake_vllm, tmp_path, monkeypatch):
    from ableaudit.backends.base import results_in_batches

    monkeypatch.setenv("FAKE_VLLM_DELAY", "0.5")
    b = make_backend(
        Target(
            name="v",
            backend="vllm",
            model="org/m",
            batch_size=2,
            options={"exchange_dir": str(tmp_path / "x"), "poll_s": 0.05},
        )
    )
    reqs = [_req(k, f"words of {k}", max_new_tokens=8) for k in "abcde"]
    batches = results_in_batches(b, reqs, 2)
    first = next(batches)
    # the first part landed while the worker was still generating the rest
    assert not (b.last_run_dir / "responses.parquet").exists()
    rest = [r for batch in batches for r in batch]
    assert sorted(r.key for r in first + rest) == list("abcde")
    assert [r.key for r in first] == ["a", "b"] and all(r.status == "ok" for r in first + rest)
    assert sorted(p.name for p in b.last_run_dir.glob("responses.parquet.part-*")) == [
        f"responses.parquet.part-0000{i}" for i in range(3)
    ]
    calls = [json.loads(line) for line in fake_vllm.read_text().splitlines()]
    assert [c.get("chat") for c in calls] == [None, 2, 2, 1]  # the model loaded once, three parts


def test_real_worker_with_adapter(fake_vllm, tmp_path):
    b = make_backend(Target(name="v", backend="vllm", model="org/m"), adapter=str(tmp_path))
    res = b.generate([_req("a", "abc")])
    assert res[0].text == "[lora] cba"
    calls = [json.loads(line) for line in fake_vllm.read_text().splitlines()]
    assert calls[0]["init"]["enable_lora"] is True and calls[1]["lora"] == str(tmp_path)
    assert f"+adapter:{tmp_path.resolve()}#" in b.model_revision
    assert (
        res[0].model_revision == b.model_revision
    )  # the worker's model, with the adapter it applied


def test_worker_without_vllm_exits_3_and_backend_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLEAUDIT_VLLM_PYTHON", sys.executable)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    b = make_backend(Target(name="v", backend="vllm", model="org/m"))
    with pytest.raises(BackendError, match="cannot import vllm"):
        b.generate([_req("a", "x")])
    req = write_requests(tmp_path / "r.parquet", [_row("a")])
    run = subprocess.run(
        [sys.executable, str(WORKER), str(req), str(tmp_path / "o.parquet")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 3 and "pip install vllm" in run.stderr


def test_worker_is_standalone_and_validates(tmp_path):
    """Run as a plain script (no ableaudit on the path): --validate-only, and exit 2 on a bad file."""
    req = write_requests(tmp_path / "r.parquet", [_row("a"), _row("b")])
    env = {"PATH": "/usr/bin:/bin"}
    ok = subprocess.run(
        [sys.executable, str(WORKER), str(req), str(tmp_path / "o.parquet"), "--validate-only"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert ok.returncode == 0 and "is valid (2 requests for org/m)" in ok.stderr
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"key": ["a"]}), bad)
    r = subprocess.run(
        [sys.executable, str(WORKER), str(bad), str(tmp_path / "o.parquet")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "lacks column" in r.stderr
    mismatch = subprocess.run(
        [sys.executable, str(WORKER), str(req), str(tmp_path / "o.parquet"), "--model", "x/y"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert mismatch.returncode == 2 and "differs" in mismatch.stderr
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import vllm_worker; "
            "print(sorted(m for m in ('torch', 'pydantic', 'vllm', 'ableaudit') if m in sys.modules))",
            str(WORKER.parent),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert probe.stdout.strip() == "[]", probe.stderr


def test_real_worker_constrains_to_a_json_schema(fake_vllm, tmp_path):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    b = make_backend(
        Target(
            name="v", backend="vllm", model="org/m", options={"exchange_dir": str(tmp_path / "x")}
        )
    )
    res = b.generate([_req("s", "judge me", json_schema=schema), _req("f", "free")])
    assert json.loads(res[0].text) == {"a": "x"} and res[1].text == "eerf"
    calls = [json.loads(line) for line in fake_vllm.read_text().splitlines()]
    assert (
        calls[1]["params"][0]["json_schema"] == schema
        and "json_schema" not in calls[1]["params"][1]
    )
    rows = read_requests(next((tmp_path / "x").glob("vllm-*/requests.parquet")))
    assert json.loads(rows[0]["json_schema"]) == schema and rows[1]["json_schema"] is None


def test_requests_files_without_the_json_schema_column_still_read(tmp_path):
    row = _row("k")
    del row["json_schema"]
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "old.parquet")
    assert read_requests(tmp_path / "old.parquet")[0]["json_schema"] is None
    with pytest.raises(ExchangeError, match="json_schema is not JSON"):
        write_requests(tmp_path / "bad.parquet", [dict(row, json_schema="{nope")])
