"""Preflight through the command line, in-process: a bad config is one message naming the file,
the field and the fix, with exit status 2, no traceback, and no flow started."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import yaml

from ableaudit.cli.main import main
from ableaudit.config import endpoint_config, load_config, parse_config
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer, closed_port_url

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def server():
    s = FakeOpenAIServer()
    yield s
    s.close()


@pytest.fixture
def no_flow(monkeypatch):
    """The audit flow, replaced: preflight must stop a bad config before it is reached."""
    fake = types.ModuleType("ableaudit.audit.flow")

    def audit(**kwargs):
        raise AssertionError(f"the flow started: {kwargs}")

    fake.audit = audit
    monkeypatch.setitem(sys.modules, "ableaudit.audit.flow", fake)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ABLEAUDIT_VLLM_PYTHON", raising=False)
    monkeypatch.delenv("ABLEAUDIT_TEST_UNSET_KEY", raising=False)


GGUF = "  - {name: m, backend: llamacpp, model: builtin:smollm2}\n"


def served(extra: str = "", model: str = SERVED_ID) -> str:
    """An openai target on the fixture server ({url} is filled in)."""
    return f"  - {{name: m, backend: openai, model: {model}, base_url: '{{url}}'{extra}}}\n"


# config text ("{url}": the fixture server, "{closed}": a port nothing listens on) -> what the
# message must say. Each is a mistake users make; each message names the place and the fix.
CASES = {
    "top-level key typo": ("tempratures: [0.1]\ntargets:\n" + GGUF, "did you mean 'temperatures'"),
    "target key typo": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2, batchsize: 4}\n",
        "targets.0.batchsize (target 'm'): unknown key 'batchsize'; did you mean 'batch_size'",
    ),
    "decoding key typo": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2,"
        " decoding: {max_new_token: 9}}\n",
        "did you mean 'max_new_tokens'",
    ),
    "key at the wrong level": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2, max_new_tokens: 9}\n",
        "unknown key 'max_new_tokens' here; it belongs under `decoding:`",
    ),
    "misspelt key of a nested block": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2, temprature: 0}\n",
        "did you mean 'temperature' under `decoding:`",
    ),
    "subset key typo": (
        "subset: {per_domian: 2}\ntargets:\n" + GGUF,
        "subset.per_domian: unknown key 'per_domian'; did you mean 'per_domain'",
    ),
    "judge target key typo": (
        "targets:\n"
        + GGUF
        + "judges:\n  - name: j\n    target: {name: jt, backend: llamacpp, model: builtin:smollm2,"
        " api_key_envv: X}\n",
        "judges.0.target.api_key_envv (judge 'j'): unknown key 'api_key_envv'; "
        "did you mean 'api_key_env'",
    ),
    "backend near miss": (
        "targets:\n  - {name: m, backend: llama.cpp, model: builtin:smollm2}\n",
        "unknown backend 'llama.cpp'; use one of llamacpp, openai, transformers, vllm; "
        "did you mean 'llamacpp'",
    ),
    "unknown backend": (
        "targets:\n  - {name: m, backend: tgi, model: x}\n",
        "unknown backend 'tgi'; use one of",
    ),
    "backend option typo": (
        "targets:\n" + served(", options: {tiemout_s: 30}"),
        "target 'm': options.tiemout_s is not an option of backend openai",
    ),
    "a key written into options": (
        "targets:\n" + served(", options: {api_key: abc}"),
        "a key never goes in the config: export it and name the variable in `api_key_env:`",
    ),
    "option of the wrong type": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2,"
        " options: {n_ctx: big}}\n",
        "options.n_ctx is 'big'; it must be of type int",
    ),
    "negative temperature": (
        "temperatures: [-1.0]\ntargets:\n" + GGUF,
        "temperatures.0: temperature -1.0 is out of range: it must be a finite number >= 0",
    ),
    "temperature not a number": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2,"
        " decoding: {temperature: .nan}}\n",
        "decoding.temperature (target 'm'): temperature nan is out of range",
    ),
    "no tokens": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2,"
        " decoding: {max_new_tokens: 0}}\n",
        "decoding.max_new_tokens (target 'm'): 0 is out of range: it must be greater than or "
        "equal to 1",
    ),
    "no samples": ("samples: 0\ntargets:\n" + GGUF, "samples: 0 is out of range"),
    "top_p above 1": (
        "targets:\n  - {name: m, backend: llamacpp, model: builtin:smollm2,"
        " decoding: {top_p: 1.5}}\n",
        "decoding.top_p (target 'm'): 1.5 is out of range: it must be less than or equal to 1",
    ),
    "disability display name, singular": (
        "subset: {disabilities: [Hearing impairment]}\ntargets:\n" + GGUF,
        "subset.disabilities: unknown disability category 'Hearing impairment'; use ids, one of "
        "genetic_developmental, hearing,",
    ),
    "domain typo": (
        "subset: {domains: [educaton]}\ntargets:\n" + GGUF,
        "subset.domains: unknown domain 'educaton'; use ids, one of education, finance, "
        "healthcare, hospitality, media, technology; did you mean 'education'?",
    ),
    "query id typo": (
        "subset: {query_ids: [edu_01]}\ntargets:\n" + GGUF,
        "subset.query_ids: unknown query id 'edu_01' (seeds/queries.csv); did you mean",
    ),
    "query set not landed": (
        "query_set: accesseval\ntargets:\n" + GGUF,
        "query_set: 'accesseval' is neither built in nor landed",
    ),
    "baseline arm misspelt": (
        "arms: [{name: basline}]\ntargets:\n" + GGUF,
        "arms: 'basline' looks like a misspelt 'baseline'",
    ),
    "missing GGUF file": (
        "targets:\n  - {name: m, backend: llamacpp, model: /nowhere/model.gguf}\n",
        "target 'm': GGUF file '/nowhere/model.gguf' does not exist; set `model:` to a .gguf path",
    ),
    "missing model folder": (
        "targets:\n  - {name: m, backend: transformers, model: ./no-such-checkpoint}\n",
        "target 'm': model folder './no-such-checkpoint' does not exist; fix `model:`",
    ),
    "base_url that is no URL": (
        "targets:\n  - {name: m, backend: openai, model: x, base_url: banana}\n",
        "targets.0.base_url (target 'm'): base_url 'banana' is not a URL",
    ),
    "unreachable server": (
        "targets:\n  - {name: m, backend: openai, model: x, base_url: '{closed}'}\n",
        "target 'm': cannot reach {closed} (GET /models: ",
    ),
    "unreachable judge server": (
        "targets:\n"
        + GGUF
        + "judges:\n  - name: j\n    target: {name: jt, backend: openai, model: x,"
        " base_url: '{closed}'}\n",
        "judge 'j': cannot reach {closed}",
    ),
    "model the server does not serve": (
        "targets:\n" + served(model="echo-modle"),
        "does not serve model 'echo-modle'; it serves echo-model; did you mean 'echo-model'?",
    ),
    "a key in api_key_env": (
        "targets:\n"
        "  - {name: m, backend: openai, model: x, base_url: '{url}', api_key_env: sk-abc123def}\n",
        "api_key_env must name an environment variable",
    ),
    "remote server without its key": (
        "targets:\n  - {name: m, backend: openai, model: x, base_url: 'https://api.example.com/v1',"
        " api_key_env: ABLEAUDIT_TEST_UNSET_KEY, options: {check_server: false}}\n",
        "no API key for https://api.example.com/v1: env var ABLEAUDIT_TEST_UNSET_KEY is unset",
    ),
    "vllm without a worker": (
        "targets:\n  - {name: m, backend: vllm, model: org/m}\n",
        "target 'm': backend vllm has no worker: set env ABLEAUDIT_VLLM_PYTHON",
    ),
    "vision images missing": (
        "vision: {image_set: pairs, image_root: /nowhere/pairs}\ntargets:\n"
        "  - {name: v, backend: openai, task: vision, model: x, base_url: '{url}'}\n",
        "vision.image_root '/nowhere/pairs' is not a folder",
    ),
    "not a mapping": ("- just\n- a list\n", "must be a YAML mapping"),
    "not YAML": ("targets: [\n", "is not valid YAML"),
    "vllm engine typo": (
        "targets:\n  - {name: v, backend: vllm, model: org/m, options: {engine: ray, "
        "worker_cmd: python}}\n",
        "target 'v': options.engine is 'ray'; it must be one of llm, ray-data",
    ),
    "task runner kind typo": (
        "task_runner: {kind: dusk}\ntargets:\n" + served(),
        "task_runner.kind",
    ),
    "task runner workers with an address": (
        "task_runner: {kind: dask, address: 'tcp://10.0.0.1:8786', n_workers: 4}\ntargets:\n"
        + served(),
        "task_runner: n_workers starts a local cluster, but address 'tcp://10.0.0.1:8786' names a "
        "running one",
    ),
    "task runner address on threads": (
        "task_runner: {address: 'tcp://10.0.0.1:8786'}\ntargets:\n" + served(),
        "task_runner: address applies to kind dask or ray",
    ),
    "dask scheduler not listening": (
        "task_runner: {kind: dask, address: '{closed_tcp}'}\ntargets:\n" + served(),
        "task_runner.address: the dask scheduler at {closed_tcp} is not reachable",
    ),
}


def _audit(tmp_path: Path, text: str, *extra: str) -> tuple[int, Path]:
    path = tmp_path / "audit.yaml"
    path.write_text(text)
    return main(
        ["audit", "--config", str(path), "--warehouse", str(tmp_path / "wh.duckdb"), *extra]
    ), path


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_config_is_one_message_before_anything_starts(
    case, tmp_path, server, no_flow, capsys
):
    closed = closed_port_url()
    closed_tcp = "tcp://" + closed.split("://", 1)[1].split("/", 1)[0]
    text, fragment = (
        s.replace("{url}", server.base_url)
        .replace("{closed_tcp}", closed_tcp)
        .replace("{closed}", closed)
        for s in CASES[case]
    )
    code, path = _audit(tmp_path, text)
    err = capsys.readouterr().err
    assert code == 2, err
    assert fragment in err
    assert str(path) in err  # the file is named
    assert "Traceback" not in err
    assert err.startswith("ableaudit: error: ")
    assert not (tmp_path / "wh.duckdb").exists()  # nothing was built or landed


def test_every_problem_is_listed_at_once(tmp_path, no_flow, capsys):
    text = (
        "subset: {domains: [educaton], disabilities: [hearing, Vision impairment]}\n"
        "targets:\n"
        "  - {name: a, backend: llamacpp, model: /nowhere/a.gguf, options: {n_thread: 2}}\n"
        f"  - {{name: b, backend: openai, model: x, base_url: '{closed_port_url()}'}}\n"
    )
    code, path = _audit(tmp_path, text)
    err = capsys.readouterr().err
    assert code == 2
    assert f"audit config {path}: 5 problems found before starting:" in err
    for fragment in (
        "'educaton'",
        "'Vision impairment'",
        "n_thread",
        "/nowhere/a.gguf",
        "cannot reach",
    ):
        assert fragment in err
    assert "did you mean 'n_threads'" in err and "did you mean 'vision' (Vision impairments)" in err


def test_a_missing_config_file_is_named(tmp_path, no_flow, capsys):
    code = main(["audit", "--config", str(tmp_path / "nope.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and f"audit config {tmp_path / 'nope.yaml'} does not exist" in err


def test_a_misspelt_config_file_name_gets_a_suggestion(tmp_path, no_flow, capsys):
    (tmp_path / "my-audit.yaml").write_text("targets: []\n")
    assert main(["audit", "--config", str(tmp_path / "my-adit.yaml")]) == 2
    assert f"did you mean {str(tmp_path / 'my-audit.yaml')!r}" in capsys.readouterr().err


def test_debug_shows_the_traceback(tmp_path, no_flow, capsys):
    path = tmp_path / "audit.yaml"
    path.write_text("targets:\n  - {name: m, backend: tgi, model: x}\n")
    for argv in (
        ["--debug", "audit", "--config", str(path)],
        ["audit", "--debug", "--config", str(path)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" in err and "ConfigError" in err and "unknown backend 'tgi'" in err


def test_a_good_config_passes_preflight_and_reaches_the_flow(tmp_path, server, monkeypatch, capsys):
    called = {}
    fake = types.ModuleType("ableaudit.audit.flow")

    def audit(**kwargs):
        called.update(kwargs)
        return {"run_id": "r", "targets": {"m": {"inserted": 0}}}

    fake.audit = audit
    fake.result_paths = lambda warehouse, published, report: {"warehouse": warehouse}
    monkeypatch.setitem(sys.modules, "ableaudit.audit.flow", fake)
    code, path = _audit(
        tmp_path, "targets:\n" + served().replace("{url}", server.base_url), "--no-build"
    )
    assert code == 0, capsys.readouterr().err
    assert called == {
        "config": str(path),
        "warehouse": str(tmp_path / "wh.duckdb"),
        "build": False,
        "first_look": None,
    }


# ----------------------------------------------------------------- the one-line endpoint audit


def test_print_config_round_trips_through_the_loader(tmp_path, server, capsys):
    argv = ["audit", "--model", SERVED_ID, "--base-url", server.base_url]
    assert main([*argv, "--print-config"]) == 0
    printed = capsys.readouterr().out
    data = yaml.safe_load(printed)
    assert data == endpoint_config(SERVED_ID, server.base_url)
    assert data["subset"] == {"per_domain": 2, "seed": 0} and data["temperatures"] == [0.1]
    (tmp_path / "printed.yaml").write_text(printed)
    assert load_config(tmp_path / "printed.yaml") == parse_config(
        endpoint_config(SERVED_ID, server.base_url)
    )


def test_print_config_of_a_config_file_round_trips(capsys):
    assert main(["audit", "--config", str(ROOT / "configs" / "judged.yaml"), "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert parse_config(printed) == load_config(ROOT / "configs" / "judged.yaml")


def test_the_endpoint_flags_make_a_judged_config(capsys):
    argv = [
        "audit",
        "--model",
        "Qwen/Qwen2.5-7B-Instruct",
        "--base-url",
        "http://127.0.0.1:8000/v1",
        "--subset",
        "all",
        "--judge-model",
        "judge-m",
        "--judge-base-url",
        "http://127.0.0.1:8001/v1",
        "--print-config",
    ]
    assert main(argv) == 0
    cfg = parse_config(yaml.safe_load(capsys.readouterr().out))
    (target,) = cfg.targets
    assert (target.name, target.model, target.reported_model_id) == (
        "qwen2.5-7b-instruct",
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-7B-Instruct",
    )
    assert cfg.subset.per_domain is None  # all queries
    (judge,) = cfg.judges
    assert (
        judge.target.base_url == "http://127.0.0.1:8001/v1"
        and judge.target.decoding.temperature == 0
    )


def test_print_config_to_a_path_writes_it_and_the_audit_runs_from_it(
    tmp_path, server, monkeypatch, capsys
):
    called = {}
    fake = types.ModuleType("ableaudit.audit.flow")
    fake.audit = lambda **kw: called.update(kw) or {"run_id": "r", "targets": {}}
    fake.result_paths = lambda warehouse, published, report: {"warehouse": warehouse}
    monkeypatch.setitem(sys.modules, "ableaudit.audit.flow", fake)
    out = tmp_path / "cfg" / "endpoint.yaml"
    argv = ["audit", "--model", SERVED_ID, "--base-url", server.base_url, "--subset", "1"]
    assert (
        main([*argv, "--print-config", str(out), "--warehouse", str(tmp_path / "wh.duckdb")]) == 0
    )
    assert called["config"] == str(out)
    assert load_config(out).subset.per_domain == 1


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            ["--base-url", "http://127.0.0.1:8000/v1"],
            "--base-url describe the model to audit: add --model",
        ),
        (["--model", "m", "--config", "configs/default.yaml"], "--config and --model are two ways"),
        (["--model", "m", "--base-url", "banana"], "base_url 'banana' is not a URL"),
        (["--model", "m", "--judge-base-url", "http://h/v1"], "add --judge-model NAME"),
        (["--model", "m", "--backend", "llama-cpp"], "did you mean 'llamacpp'"),
        (
            ["--model", "m", "--backend", "llamacpp", "--base-url", "http://h/v1"],
            "base_url is for backend openai",
        ),
        (["--model", "m", "--base-url", "{closed}"], "target 'm': cannot reach {closed}"),
        (
            [
                "--config",
                str(ROOT / "configs" / "default.yaml"),
                "--print-config",
                str(ROOT / "configs" / "default.yaml"),
            ],
            "would overwrite the config",
        ),
    ],
)
def test_endpoint_flags_are_checked_before_anything_starts(argv, fragment, no_flow, capsys):
    closed = closed_port_url()
    argv = [a.replace("{closed}", closed) for a in argv]
    assert main(["audit", *argv]) == 2
    err = capsys.readouterr().err
    assert fragment.replace("{closed}", closed) in err and "Traceback" not in err


def test_subset_must_be_a_count_or_all(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "--model", "m", "--subset", "0"])
    assert exit_.value.code == 2
    assert (
        "give a number of neutral queries per domain (1 or more) or 'all'"
        in capsys.readouterr().err
    )


def test_import_commands_name_a_missing_file_before_dbt(tmp_path, capsys):
    wh = str(tmp_path / "wh.duckdb")
    for what in ("responses", "judgments", "annotations", "queries"):
        assert main(["import", what, str(tmp_path / f"missing-{what}.csv"), "--warehouse", wh]) == 2
        err = capsys.readouterr().err
        assert (
            f"missing-{what}.csv does not exist; check the path" in err and "Traceback" not in err
        )
    assert not Path(wh).exists()


def test_a_cluster_kind_without_its_packages_is_named_with_the_install(
    tmp_path, server, no_flow, monkeypatch, capsys
):
    from ableaudit.audit import runners

    monkeypatch.setattr(runners, "missing_packages", lambda kind: ["prefect_ray", "ray"])
    code, path = _audit(
        tmp_path,
        "task_runner: {kind: ray}\ntargets:\n" + served().replace("{url}", server.base_url),
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "task_runner.kind: ray needs prefect_ray, ray, not installed here: pip install" in err
    assert not (tmp_path / "wh.duckdb").exists()


def test_a_local_dask_cluster_passes_preflight(tmp_path, server, monkeypatch, capsys):
    pytest.importorskip("prefect_dask")
    seen = {}

    def audit(**kwargs):
        seen.update(kwargs)
        return {"run_id": "r", "targets": {"m": {"inserted": 0}}}

    fake = types.ModuleType("ableaudit.audit.flow")
    fake.audit = audit
    fake.result_paths = lambda warehouse, published, report: {"warehouse": warehouse}
    monkeypatch.setitem(sys.modules, "ableaudit.audit.flow", fake)
    text = "task_runner: {kind: dask, n_workers: 2}\ntargets:\n" + served().replace(
        "{url}", server.base_url
    )
    code, path = _audit(tmp_path, text, "--no-build")
    assert code == 0, capsys.readouterr().err
    assert seen["config"] == str(path)
    assert load_config(path).task_runner.n_workers == 2


def test_a_first_look_needs_a_build_and_is_refused_before_anything_starts(
    tmp_path, no_flow, capsys
):
    default = str(ROOT / "configs" / "default.yaml")
    unbuilt = tmp_path / "unbuilt.yaml"
    unbuilt.write_text(f"build: false\ntargets:\n{GGUF}")
    wh = str(tmp_path / "wh.duckdb")
    for argv in (["--config", default, "--no-build"], ["--config", str(unbuilt)]):
        assert main(["audit", *argv, "--first-look", "2", "--warehouse", wh]) == 2
        err = capsys.readouterr().err
        assert "--first-look prints rates, which need a build" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "--first-look", "0"])
    assert exit_.value.code == 2
    assert "give a number of neutral queries (1 or more)" in capsys.readouterr().err
