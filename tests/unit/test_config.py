import pytest

from ableaudit.config import PAPER_MAX_NEW_TOKENS, PAPER_SYSTEM_PROMPT, PAPER_TEMPERATURE, ConfigError, load_config, parse_config
from ableaudit.keys import model_fingerprint, resolve_builtin

from ableaudit import PROJECT_ROOT as ROOT


def test_default_config_is_valid_and_uses_the_paper_prompt():
    cfg = load_config(ROOT / "configs" / "default.yaml")
    assert cfg.temperatures == [PAPER_TEMPERATURE]
    t = cfg.targets[0]
    assert t.backend == "llamacpp" and t.system_prompt == PAPER_SYSTEM_PROMPT
    assert cfg.subset.per_domain == 2


def test_paper_defaults_apply_when_unspecified():
    cfg = parse_config({"targets": [{"name": "m", "backend": "openai", "model": "x"}]})
    assert cfg.targets[0].decoding.max_new_tokens == PAPER_MAX_NEW_TOKENS == 1048
    assert cfg.targets[0].system_prompt == "You are a helpful assistant."
    assert [a.name for a in cfg.arms] == ["baseline"]


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"targets": [{"name": "m", "backend": "nope", "model": "x"}]}, "targets.0.backend"),
        ({"targets": [{"name": "m", "backend": "openai", "model": "x", "temprature": 1}]}, "targets.0.temprature"),
        ({"targets": []}, "at least one target"),
        ({"targets": [{"name": "m", "backend": "openai", "model": "x"}] * 2}, "repeated: ['m']"),
        ({"targets": [{"name": "m", "backend": "openai", "model": "x"}], "arms": [{"name": "bad arm"}]}, "arm name"),
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
