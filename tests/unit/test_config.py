import pytest

from ableaudit import PROJECT_ROOT as ROOT
from ableaudit.config import ConfigError, load_config, parse_config
from ableaudit.keys import model_fingerprint, resolve_builtin
from ableaudit.target import PAPER_MAX_NEW_TOKENS, PAPER_SYSTEM_PROMPT, PAPER_TEMPERATURE


def test_default_config_is_valid_and_uses_the_paper_prompt():
    cfg = load_config(ROOT / "configs" / "default.yaml")
    assert cfg.temperatures == [PAPER_TEMPERATURE]
    t = cfg.targets[0]
    assert t.backend == "llamacpp" and t.system_prompt == PAPER_SYSTEM_PROMPT
    assert cfg.subset.per_domain == 1
    # the window holds the prompt and the longest answer the cap allows
    assert t.decoding.max_new_tokens + 512 <= t.options["n_ctx"]


def test_paper_defaults_apply_when_unspecified():
    cfg = parse_config({"targets": [{"name": "m", "backend": "openai", "model": "x"}]})
    assert cfg.targets[0].decoding.max_new_tokens == PAPER_MAX_NEW_TOKENS == 1048
    assert cfg.targets[0].system_prompt == "You are a helpful assistant."
    assert [a.name for a in cfg.arms] == ["baseline"]


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"targets": [{"name": "m", "backend": "nope", "model": "x"}]}, "targets.0.backend"),
        (
            {"targets": [{"name": "m", "backend": "openai", "model": "x", "temprature": 1}]},
            "targets.0.temprature",
        ),
        ({"targets": []}, "at least one target"),
        ({"targets": [{"name": "m", "backend": "openai", "model": "x"}] * 2}, "repeated: ['m']"),
        (
            {
                "targets": [{"name": "m", "backend": "openai", "model": "x"}],
                "arms": [{"name": "bad arm"}],
            },
            "arm name",
        ),
        ({"targets": [{"name": "m", "backend": "openai", "model": "x"}], "samples": 0}, "samples"),
    ],
)
def test_bad_config_names_the_field(data, fragment):
    with pytest.raises(ConfigError) as err:
        parse_config(data, "test.yaml")
    assert fragment in str(err.value)
    assert "test.yaml" in str(err.value)


def test_missing_config_file_is_clear(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_builtin_model_resolves_to_the_packaged_gguf():
    path = resolve_builtin("builtin:smollm2")
    assert path.is_file() and path.suffix == ".gguf"
    assert model_fingerprint("builtin:smollm2").startswith("builtin:smollm2@")


def test_local_model_fingerprint_changes_with_the_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    before = model_fingerprint(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"x" * 10)
    assert model_fingerprint(str(tmp_path)) != before
    assert model_fingerprint("org/model", "abc") == "org/model@abc"


# --------------------------------------------------------------------------- the vision block

VISION_TARGET = {"name": "v", "backend": "openai", "model": "m", "task": "vision"}


def test_vision_block_holds_the_vision_settings():
    cfg = parse_config(
        {
            "targets": [VISION_TARGET],
            "vision": {
                "image_set": "pairs",
                "image_root": ".",
                "manifest": "m.csv",
                "subset": {"per_domain": 2},
                "temperatures": [0.0, 0.5],
                "probe_disability_assignment": True,
            },
        }
    )
    v = cfg.vision
    assert (v.image_set, v.image_root, v.manifest) == ("pairs", ".", "m.csv")
    assert (
        v.subset.per_domain == 2 and v.temperatures == [0.0, 0.5] and v.probe_disability_assignment
    )
    # the text settings stay apart
    assert cfg.subset.per_domain is None and cfg.temperatures == [PAPER_TEMPERATURE]
    defaults = parse_config({"targets": [{"name": "t", "backend": "openai", "model": "m"}]}).vision
    assert (
        defaults.temperatures == [0.0]
        and not defaults.probe_disability_assignment
        and defaults.image_set is None
    )


@pytest.mark.parametrize(
    "old, value, new",
    [
        ("image_set", "pairs", "image_set"),
        ("image_root", ".", "image_root"),
        ("image_manifest", "m.csv", "manifest"),
        ("vision_subset", {"per_domain": 3}, "subset"),
        ("vision_temperatures", [0.0, 1.0], "temperatures"),
        ("probe_disability_assignment", True, "probe_disability_assignment"),
    ],
)
def test_deprecated_top_level_vision_keys_move_into_the_block(old, value, new, caplog):
    data = {"targets": [VISION_TARGET], "vision": {"image_set": "pairs", "image_root": "."}}
    data["vision"].pop(new, None)
    data[old] = value
    with (
        caplog.at_level("WARNING", logger="ableaudit.config"),
        pytest.warns(DeprecationWarning, match=f"`{old}` is deprecated.*`vision.{new}`"),
    ):
        cfg = parse_config(data)
    got = getattr(cfg.vision, new)
    assert (got.model_dump(exclude_defaults=True) if hasattr(got, "model_dump") else got) == value
    assert any(
        f"`{old}`" in r.getMessage() and f"`vision.{new}`" in r.getMessage() for r in caplog.records
    )


def test_a_config_of_only_old_keys_still_runs(recwarn):
    cfg = parse_config(
        {
            "targets": [VISION_TARGET],
            "image_set": "pairs",
            "image_root": ".",
            "vision_temperatures": [0.5],
        }
    )
    assert (cfg.vision.image_set, cfg.vision.image_root, cfg.vision.temperatures) == (
        "pairs",
        ".",
        [0.5],
    )
    assert {
        str(w.message).split("`")[1] for w in recwarn.list if w.category is DeprecationWarning
    } == {"image_set", "image_root", "vision_temperatures"}


def test_old_and_new_vision_key_together_is_an_error_naming_both():
    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "targets": [VISION_TARGET],
                "image_manifest": "a.csv",
                "vision": {"image_set": "pairs", "image_root": ".", "manifest": "b.csv"},
            },
            "both.yaml",
        )
    assert "`image_manifest` (top level)" in str(err.value) and "`vision.manifest`" in str(
        err.value
    )
    assert "both.yaml" in str(err.value)


def test_unknown_vision_key_is_named():
    with pytest.raises(ConfigError, match=r"vision\.image_mainfest"):
        parse_config(
            {
                "targets": [VISION_TARGET],
                "vision": {"image_set": "pairs", "image_root": ".", "image_mainfest": "x.csv"},
            }
        )


@pytest.mark.parametrize("name", ["default.yaml", "judged.yaml", "vision-example.yaml"])
def test_shipped_configs_use_no_deprecated_key(name):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        load_config(ROOT / "configs" / name)


def test_vision_paths_resolve_against_the_project(tmp_path, monkeypatch):
    from ableaudit.config import VisionSettings

    monkeypatch.chdir(tmp_path)
    v = VisionSettings(image_set="pairs", image_root="seeds", manifest="seeds/queries.csv")
    assert (
        v.image_root_path() == (ROOT / "seeds").resolve()
    )  # not in the working directory: the project's
    assert v.manifest_path() == ROOT / "seeds" / "queries.csv"
    assert v.images_folder() == v.image_root_path()  # a manifest: paths are under image_root
    (tmp_path / "seeds").mkdir()
    assert (
        v.image_root_path() == (tmp_path / "seeds").resolve()
    )  # the working directory comes first
    assert VisionSettings(image_set="pairs").manifest_path() is None
    with pytest.raises(ConfigError, match="no `vision.image_root`"):
        VisionSettings(image_set="pairs").image_root_path()
    with pytest.raises(ConfigError, match=r"vision.image_root 'nope' is not a folder"):
        VisionSettings(image_set="pairs", image_root="nope").image_root_path()


def test_a_pairs_tree_is_found_under_the_image_root(tmp_path):
    from ableaudit.config import VisionSettings

    (tmp_path / "data" / "status").mkdir(parents=True)
    v = VisionSettings(image_set="pairs", image_root=str(tmp_path))
    assert v.images_folder() == (tmp_path / "data").resolve()


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "HF_TOKEN", "TOGETHER_API_KEY_2", "AzureOpenAIKeyProduction01", "_K"]
)
def test_api_key_env_takes_a_variable_name(name):
    cfg = parse_config(
        {"targets": [{"name": "m", "backend": "openai", "model": "x", "api_key_env": name}]}
    )
    assert cfg.targets[0].api_key_env == name


@pytest.mark.parametrize(
    "pasted",
    [
        "sk-proj-abc123def456",
        "hf_AbCdEfGhIjKlMnOpQrStUv",
        "Tqk57ui6xWJEid_uAv9B4Ux_XnlH7Po4",  # long and random
        "7644555acb85c52765f6e9b3a3cd8beb",  # hex: starts with a digit
        "abc.def-ghi",  # characters a name cannot hold
        "my key",
    ],
)
def test_a_key_pasted_into_api_key_env_is_refused_without_echoing_it(pasted):
    with pytest.raises(ConfigError) as err:
        parse_config(
            {"targets": [{"name": "m", "backend": "openai", "model": "x", "api_key_env": pasted}]}
        )
    message = str(err.value)
    assert "targets.0.api_key_env" in message
    assert "must name an environment variable" in message and "export" in message
    assert pasted not in message


def test_a_repeated_replica_is_named_without_its_credentials():
    url = "http://user:s3cr3t-canary@127.0.0.1:8000/v1"
    with pytest.raises(ConfigError) as err:
        parse_config(
            {"targets": [{"name": "m", "backend": "openai", "model": "x", "base_url": [url, url]}]}
        )
    assert "lists a server twice" in str(err.value) and "s3cr3t-canary" not in str(err.value)
    assert "http://127.0.0.1:8000/v1" in str(err.value)


def _with_alerts(alerts) -> dict:
    return {"targets": [{"name": "m", "backend": "openai", "model": "x"}], "alerts": alerts}


def test_the_reaudit_example_alerts_and_reasks():
    cfg = load_config(ROOT / "configs" / "reaudit.example.yaml")
    assert cfg.reask == "each_run"
    assert cfg.alerts.webhook_url_env == "ABLEAUDIT_ALERT_URL"
    assert cfg.alerts.when == ["regression", "gate_failure"]
    (target,) = cfg.targets
    assert target.backend == "openai" and target.base_urls[0].startswith("https://")
    assert target.api_key_env == "OPENAI_API_KEY"


@pytest.mark.parametrize(
    "alerts",
    [
        {"webhook_url": "http://127.0.0.1:9000/hook"},
        {"webhook_url_env": "ALERT_URL", "when": ["gate_failure"]},
        {"block": "webhook/ableaudit-alerts", "report_url_base": "https://r.example.org/report/"},
        {},  # no destination: the Prefect event alone
    ],
)
def test_alerts_take_one_destination(alerts):
    cfg = parse_config(_with_alerts(alerts))
    assert cfg.alerts.retries == 2 and cfg.alerts.timeout_s == 10


@pytest.mark.parametrize(
    "alerts, fragment",
    [
        ({"webhook_url": "http://a", "block": "webhook/a"}, "not webhook_url and block"),
        (
            {"webhook_url": "hooks.example.org/x"},
            "alerts.webhook_url: 'hooks.example.org/x' is not an http(s) URL",
        ),
        ({"webhook_url_env": "https://hooks.example.org/x"}, "alerts.webhook_url_env:"),
        ({"block": "My Block"}, "alerts.block: block 'My Block' must be"),
        (
            {"block": "webhook/a", "when": []},
            "alerts.when: `alerts.when` lists regression and/or gate_failure, each once",
        ),
        (
            {"block": "webhook/a", "when": ["regression", "regression"]},
            "alerts.when: `alerts.when` lists regression and/or gate_failure, each once",
        ),
        ({"block": "webhook/a", "when": ["drift"]}, "alerts.when.0:"),
        ({"block": "webhook/a", "report_url_base": "/srv/report"}, "alerts.report_url_base:"),
        ({"block": "webhook/a", "retries": -1}, "alerts.retries:"),
        ({"block": "webhook/a", "webhok_url": "x"}, "alerts.webhok_url:"),
    ],
)
def test_a_bad_alerts_block_names_the_field(alerts, fragment):
    with pytest.raises(ConfigError) as err:
        parse_config(_with_alerts(alerts))
    assert fragment in str(err.value)


def test_reask_takes_never_or_each_run():
    base = {"targets": [{"name": "m", "backend": "openai", "model": "x"}]}
    assert parse_config(base).reask == "never"
    with pytest.raises(
        ConfigError, match="reask: 'always' is wrong: it must be 'never' or 'each_run'"
    ):
        parse_config(base | {"reask": "always"})


def test_alerts_when_survives_yaml(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text(
        "targets: [{name: m, backend: openai, model: x}]\n"
        "alerts: {webhook_url: 'http://127.0.0.1:9/h', when: [gate_failure]}\n"
    )
    assert load_config(path).alerts.when == ["gate_failure"]


ONE_TARGET = {"targets": [{"name": "m", "backend": "openai", "model": "x"}]}


def test_the_task_runner_defaults_to_threads_here():
    runner = parse_config(ONE_TARGET).task_runner
    assert (runner.kind, runner.address, runner.n_workers, runner.chunk_size) == (
        "thread",
        None,
        None,
        64,
    )
    assert runner.local


@pytest.mark.parametrize(
    "block, local",
    [
        ({"kind": "dask", "n_workers": 4, "processes": False}, True),
        ({"kind": "dask", "address": "auto"}, True),
        ({"kind": "dask", "address": "tcp://10.0.0.5:8786", "chunk_size": 256}, False),
        ({"kind": "ray", "address": "ray://head:10001"}, False),
        ({"kind": "ray"}, True),
    ],
)
def test_a_cluster_task_runner_parses(block, local):
    runner = parse_config({**ONE_TARGET, "task_runner": block}).task_runner
    assert runner.kind == block["kind"] and runner.local is local
    assert runner.model_dump(exclude_defaults=True) == block


@pytest.mark.parametrize(
    "block, fragment",
    [
        (
            {"kind": "spark"},
            "task_runner.kind: 'spark' is wrong: it must be 'thread', 'dask' or 'ray'",
        ),
        ({"kind": "dask", "workers": 2}, "task_runner.workers: unknown key 'workers'"),
        ({"kind": "dask", "chunk_size": 0}, "task_runner.chunk_size"),
        ({"n_workers": 2}, "n_workers applies to kind dask or ray"),
        ({"chunk_size": 8}, "chunk_size applies to kind dask or ray; with kind thread"),
        ({"kind": "ray", "processes": False}, "processes applies to a local Dask cluster"),
        (
            {"kind": "dask", "address": "tcp://h:8786", "threads_per_worker": 2},
            "threads_per_worker applies to a local Dask cluster",
        ),
        (
            {"kind": "dask", "address": "tcp://h:8786", "n_workers": 2},
            "n_workers starts a local cluster, but address 'tcp://h:8786' names a running one",
        ),
        ({"kind": "dask", "address": "scheduler"}, "write it as tcp://HOST:8786"),
    ],
)
def test_a_bad_task_runner_names_the_field_and_the_fix(block, fragment):
    with pytest.raises(ConfigError) as err:
        parse_config({**ONE_TARGET, "task_runner": block}, "test.yaml")
    assert fragment in str(err.value) and "test.yaml" in str(err.value)


@pytest.mark.parametrize("kind", ["audit", "queryset", "gates"])
def test_a_yaml_error_names_the_file_and_the_line(tmp_path, capsys, kind):
    """The message names the file, the line and the column, never the parser's
    "<unicode string>"; through the command line it is one message, exit status 2."""
    from ableaudit.cli.main import main
    from ableaudit.gates.rules import GateFileError, load_gates
    from ableaudit.queryset.config import load_build_config

    bad = tmp_path / "bad config.yaml"
    bad.write_text("targets:\n  - name: x\n   backend: openai\n")
    load = {"audit": load_config, "queryset": load_build_config, "gates": load_gates}[kind]
    with pytest.raises((ConfigError, GateFileError)) as caught:
        load(bad)
    message = str(caught.value)
    assert str(bad) in message and "line 3, column 4" in message, message
    assert "unicode string" not in message
    if kind == "audit":
        assert main(["audit", "--config", str(bad), "--warehouse", str(tmp_path / "w")]) == 2
        err = capsys.readouterr().err
        assert str(bad) in err and "line 3" in err and "unicode string" not in err
