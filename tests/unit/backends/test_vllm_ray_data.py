"""The vllm backend's Ray Data engine (``options.engine: ray-data``) against a stand-in ``ray``.

vLLM and Ray are not installed here: a stand-in ``ray`` package (``ray.init``, ``ray.data``
with ``from_items`` and ``iter_rows``, ``ray.data.llm`` with ``vLLMEngineProcessorConfig`` and
``build_processor``) plays the documented API. It applies the worker's preprocess, answers
out of order, fails the rows it is told to as ray.data.llm does with
``should_continue_on_error`` (bypassing the postprocess), then applies the postprocess. What
is tested is ours: the dataset built from the requests file, the answers mapped back to their
keys, the parts written as they stream, the arguments the backend passes, and landing.
"""

from __future__ import annotations

import json
import sys
import textwrap
import types

import duckdb
import pytest

from ableaudit.backends import BackendError, make_backend
from ableaudit.backends.vllm_worker import ExchangeError, run_ray_data
from ableaudit.config import Target
from ableaudit.records import GenerationRequest, PlannedGeneration
from tests.fixtures.planned import planned_generation

FAKE_RAY = textwrap.dedent("""
    import json, os

    __version__ = "0.0-fake"
    _init = []

    def is_initialized():
        return bool(_init)

    def init(address=None, **kw):
        _init.append(address)
        _log({"init": address})

    def _log(obj):
        with open(os.environ["FAKE_RAY_LOG"], "a") as f:
            f.write(json.dumps(obj) + "\\n")
""")

FAKE_RAY_DATA = textwrap.dedent("""
    class Dataset:
        def __init__(self, rows):
            self._rows = list(rows)

        def iter_rows(self):
            yield from self._rows

    def from_items(items):
        return Dataset(items)
""")

FAKE_RAY_DATA_LLM = textwrap.dedent("""
    import json
    import ray
    from ray.data import Dataset

    class vLLMEngineProcessorConfig:
        def __init__(self, **kw):
            self.kw = kw

    def build_processor(config, preprocess=None, postprocess=None):
        ray._log({"config": config.kw})

        def processor(ds):
            out = []
            for row in reversed(list(ds.iter_rows())):  # answers come back out of order
                row = preprocess(row)
                user = row["messages"][-1]["content"]
                params = row["sampling_params"]
                if "FAIL" in user:  # an error row bypasses the postprocess
                    out.append({**row, "__inference_error__": "prompt too long"})
                    continue
                words = user.split()
                text = user[::-1]
                if "structured_outputs" in params:
                    text = json.dumps({k: "x" for k in params["structured_outputs"]["json"]["required"]})
                done = min(len(words), params["max_tokens"])
                out.append(postprocess({**row, "generated_text": text, "num_input_tokens": 3,
                                        "num_generated_tokens": done, "time_taken_llm": 0.25}))
            ray._log({"params": {r["key"]: r.get("sampling_params") for r in map(preprocess, ds.iter_rows())}})
            return Dataset(out)

        return processor
""")


@pytest.fixture
def fake_ray(tmp_path, monkeypatch):
    """The stand-in ray on the worker's PYTHONPATH (a subprocess), with the worker's python."""
    root = tmp_path / "fake_site"
    (root / "ray" / "data").mkdir(parents=True)
    (root / "ray" / "__init__.py").write_text(FAKE_RAY)
    (root / "ray" / "data" / "__init__.py").write_text(FAKE_RAY_DATA)
    (root / "ray" / "data" / "llm.py").write_text(FAKE_RAY_DATA_LLM)
    log = tmp_path / "ray_calls.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(root))
    monkeypatch.setenv("FAKE_RAY_LOG", str(log))
    monkeypatch.setenv("ABLEAUDIT_VLLM_PYTHON", sys.executable)
    return log


def _req(key: str, text: str, **kw) -> GenerationRequest:
    base = dict(temperature=0.0, top_p=1.0, max_new_tokens=16, seed=None)
    base.update(kw)
    return GenerationRequest(key=key, messages=({"role": "user", "content": text},), **base)


def _target(tmp_path, **opts) -> Target:
    return Target(
        name="v",
        backend="vllm",
        model="org/m",
        revision="b" * 40,
        batch_size=2,
        options={"engine": "ray-data", "exchange_dir": str(tmp_path / "x"), **opts},
    )


def test_the_worker_runs_the_batch_on_ray_data_and_maps_each_answer_to_its_key(fake_ray, tmp_path):
    b = make_backend(_target(tmp_path, ray_address="ray://head:10001", ray_concurrency=4))
    schema = {"type": "object", "required": ["verdict"]}
    reqs = [
        _req("a", "one two three", max_new_tokens=2),
        _req("b", "FAIL this one", temperature=0.5, seed=9),
        _req("c", "short", temperature=0.7, top_p=0.8, seed=1, max_new_tokens=8),
        GenerationRequest(
            key="d",
            messages=({"role": "user", "content": "judge"},),
            temperature=0.0,
            top_p=1.0,
            max_new_tokens=32,
            seed=None,
            json_schema=schema,
        ),
        _req("e", "four five", max_new_tokens=4),
    ]
    res = b.generate(reqs)
    assert [r.key for r in res] == ["a", "b", "c", "d", "e"]
    assert (res[0].text, res[0].finish_reason, res[0].completion_tokens) == (
        "eerht owt eno",
        "length",
        2,
    )
    assert res[1].status == "error" and "prompt too long" in res[1].error  # only that row fails
    assert (res[2].text, res[2].finish_reason, res[2].latency_ms) == ("trohs", "stop", 250.0)
    assert json.loads(res[3].text) == {"verdict": "x"}
    assert res[4].text == "evif ruof" and res[4].prompt_tokens == 3
    assert res[0].model_revision == "org/m@" + "b" * 40 and res[1].model_revision is None

    calls = [json.loads(line) for line in fake_ray.read_text().splitlines()]
    assert calls[0] == {"init": "ray://head:10001"}
    assert calls[1]["config"] == {
        "model_source": "org/m",
        "engine_kwargs": {"dtype": "auto", "tensor_parallel_size": 1, "revision": "b" * 40},
        "concurrency": 4,
        "batch_size": 64,
        "should_continue_on_error": True,
    }
    params = calls[2]["params"]
    assert params["c"] == {"temperature": 0.7, "top_p": 0.8, "max_tokens": 8, "seed": 1}
    assert "seed" not in params["a"]
    assert params["d"]["structured_outputs"] == {"json": schema}
    # parts of the target's batch_size were written as the answers streamed back
    parts = sorted((tmp_path / "x").rglob("responses.parquet.part-*"))
    assert len(parts) == 3


def test_ray_data_answers_land_once_each_like_any_backend(fake_ray, tmp_path, warehouse):
    """The rows a cluster worker would return (``generate_rows``) land in raw.generations."""
    from ableaudit.audit.tasks import generate_rows
    from ableaudit.warehouse.landing import land_generations

    todo = [_planned(i) for i in range(5)]
    rows = generate_rows(_target(tmp_path), None, todo, "run-1")
    report = land_generations(warehouse, rows)
    assert (report.inserted, report.errors) == (5, 0)
    con = duckdb.connect(str(warehouse), read_only=True)
    landed = con.execute(
        "select generation_id, response_text, model_revision from raw.generations order by 1"
    ).fetchall()
    con.close()
    assert landed == [(p.generation_id, p.prompt_text[::-1], "org/m@" + "b" * 40) for p in todo]
    # landing the same rows again changes nothing
    assert land_generations(warehouse, rows).unchanged == 5


def _planned(i: int) -> PlannedGeneration:
    return planned_generation(
        i,
        generation_id=f"g{i:02d}",
        target="v",
        model_id="org/m",
        backend="vllm",
        prompt_text=f"prompt number {i}",
    )


def test_the_engine_options_are_checked(tmp_path, fake_ray):
    with pytest.raises(
        BackendError, match="options.engine is 'ray'; it must be one of llm, ray-data"
    ):
        make_backend(_target(tmp_path, engine="ray"))
    with pytest.raises(BackendError, match="options ray_concurrency apply to engine ray-data"):
        make_backend(_target(tmp_path, engine="llm", ray_concurrency=2))


def test_adapters_are_refused_on_ray_data(fake_ray, tmp_path):
    b = make_backend(_target(tmp_path), adapter=str(tmp_path))
    with pytest.raises(BackendError, match="does not run adapters"):
        b.generate([_req("a", "x")])


# ------------------------------------------------------- run_ray_data in process, with stand-ins


def _modules(outputs):
    """A stand-in ray and ray.data.llm whose processor returns ``outputs(rows)``."""
    ray = types.SimpleNamespace(
        is_initialized=lambda: True,
        data=types.SimpleNamespace(from_items=lambda items: list(items)),
    )

    class Processed:
        def __init__(self, rows):
            self.rows = rows

        def iter_rows(self):
            yield from outputs(self.rows)

    llm = types.SimpleNamespace(
        vLLMEngineProcessorConfig=lambda **kw: kw,
        build_llm_processor=lambda config, preprocess, postprocess: (
            lambda ds: Processed([preprocess(r) for r in ds])
        ),
    )
    return ray, llm


def _request_rows(n: int) -> list[dict]:
    return [
        {
            "key": f"k{i}",
            "messages_json": json.dumps([{"role": "user", "content": f"t{i}"}]),
            "temperature": 0.0,
            "top_p": 1.0,
            "max_new_tokens": 4,
            "seed": None,
            "json_schema": None,
        }
        for i in range(n)
    ]


def _run(rows, outputs, parts=None):
    ray, llm = _modules(outputs)
    return run_ray_data(
        rows,
        model="m",
        engine_kwargs={},
        concurrency=1,
        batch_size=8,
        part_rows=2 if parts is not None else 0,
        on_part=(parts.append if parts is not None else None),
        ray_module=ray,
        llm_module=llm,
    )


def _answer(row):
    return {"key": row["key"], "generated_text": "ok", "num_generated_tokens": 1}


def test_a_pipeline_failing_midway_keeps_what_came_back_and_errors_the_rest():
    def outputs(rows):
        yield _answer(rows[0])
        yield _answer(rows[1])
        yield _answer(rows[2])
        raise RuntimeError("actor died")

    parts: list = []
    out = _run(_request_rows(5), outputs, parts)
    assert [r["status"] for r in out] == ["ok", "ok", "ok", "error", "error"]
    assert "ray.data.llm pipeline failed: RuntimeError: actor died" in out[4]["error"]
    assert [len(p) for p in parts] == [2, 3]  # every response is in exactly one part


@pytest.mark.parametrize(
    "outputs, message",
    [
        (lambda rows: [_answer(rows[0]), _answer(rows[0])], "returned key 'k0' twice"),
        (lambda rows: [{**_answer(rows[0]), "key": "zz"}], "returned key 'zz', which was not"),
    ],
)
def test_a_key_twice_or_unasked_is_refused(outputs, message):
    with pytest.raises(ExchangeError, match=message):
        _run(_request_rows(2), outputs)


def test_a_key_the_pipeline_never_returned_is_an_error_row():
    out = _run(_request_rows(3), lambda rows: [_answer(rows[2])])
    assert [r["status"] for r in out] == ["error", "error", "ok"]
    assert out[0]["error"] == "ray.data.llm returned no row"
