"""The backend registry: names, tasks, deferred and checked loading, and the capabilities each backend declares."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from ableaudit.backends import (
    Backend,
    BackendError,
    backend,
    backend_class,
    backend_names,
    make_backend,
    registry,
)
from ableaudit.config import ConfigError, Judge, Target, parse_config
from ableaudit.records import GenerationRequest, GenerationResult

ROOT = Path(__file__).resolve().parents[3]
CAPABILITIES = (
    "supports_stream",
    "supports_json_schema",
    "json_schema_by_default",
    "supports_images",
)


@pytest.fixture
def scratch_registry(monkeypatch):
    """A copy of the registry that a test may add to; the real one is back afterwards."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    return registry._REGISTRY


class Echo(Backend):
    name = "echo"
    supports_stream = False
    supports_json_schema = False
    json_schema_by_default = False
    supports_images = False

    def __init__(self, target: Target, adapter: str | None = None) -> None:
        self.target, self.adapter = target, adapter
        self.model_revision = f"echo:{target.model}"
        self.concurrency = target.batch_size

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        return [
            GenerationResult.from_text(
                r.key, r.messages[-1]["content"], model_revision=self.model_revision
            )
            for r in requests
        ]

    def close(self) -> None:
        pass


def test_the_built_in_backends_by_name_and_task():
    assert backend_names() == ("llamacpp", "openai", "transformers", "vllm")
    assert backend_names("text") == ("llamacpp", "openai", "transformers", "vllm")
    assert backend_names("vision") == ("openai", "transformers")
    assert backend_class("transformers", "text").__name__ == "TransformersBackend"
    assert backend_class("transformers", "vision").__name__ == "TransformersVLMBackend"
    assert backend_class("openai", "vision") is backend_class("openai", "text")


@pytest.mark.parametrize("name, task", [(n, t) for t in registry.TASKS for n in backend_names(t)])
def test_every_backend_declares_its_capabilities(name, task):
    """Declared on the class itself (not inherited by accident), each a bool; vision entries take images."""
    cls = backend_class(name, task)
    assert issubclass(cls, Backend) and cls.name == name
    for cap in CAPABILITIES:
        assert cap in vars(cls), f"{cls.__name__} does not declare {cap}"
        assert isinstance(vars(cls)[cap], bool)
    assert not cls.json_schema_by_default or cls.supports_json_schema
    assert cls.supports_images == (task == "vision" or name == "openai")


def test_unknown_backends_and_tasks_name_the_choices():
    with pytest.raises(
        BackendError,
        match="unknown backend 'tgi'; the registered backends are llamacpp, openai, "
        "transformers, vllm",
    ):
        backend_class("tgi")
    with pytest.raises(
        BackendError,
        match="backend 'vllm' cannot serve task vision; task vision runs on backend "
        "openai or transformers",
    ):
        backend_class("vllm", "vision")
    t = Target.model_construct(name="x", backend="tgi", model="m", task="text", options={})
    with pytest.raises(
        BackendError, match="target 'x': unknown backend 'tgi'; the registered backends are"
    ):
        make_backend(t)


def test_a_registered_backend_is_built_and_accepted_by_the_config(scratch_registry):
    loaded = []

    @backend("echo", tasks=("text",))
    def echo() -> type[Backend]:
        loaded.append(1)
        return Echo

    assert "echo" in backend_names() and not loaded  # registering imports nothing
    target = Target(name="e", backend="echo", model="m", batch_size=3)
    b = make_backend(target, adapter="lora")
    assert isinstance(b, Echo) and b.adapter == "lora" and b.concurrency == 3 and loaded == [1]
    (r,) = b.generate([GenerationRequest(key="k", messages=({"role": "user", "content": "hi"},))])
    assert r.model_revision == "echo:m"
    # config validation reads the registry: structured output follows the class's declaration
    with pytest.raises(
        ValueError, match="structured_output: on needs backend llamacpp, openai, vllm, not 'echo'"
    ):
        Judge(name="j", structured_output="on", target=target)
    assert Judge(name="j", target=target).structured is False
    with pytest.raises(ValueError, match="registered twice"):
        backend("echo", tasks=("text",))(echo)


def test_config_accepts_only_registered_names():
    with pytest.raises(
        ConfigError,
        match="targets.0.backend.*unknown backend 'tgi'; use one of llamacpp, openai, "
        "transformers, vllm",
    ):
        parse_config({"targets": [{"name": "m", "backend": "tgi", "model": "x"}]})
    with pytest.raises(
        ConfigError, match="task vision runs on backend openai or transformers, not 'llamacpp'"
    ):
        parse_config(
            {
                "image_set": "pairs",
                "image_root": ".",
                "targets": [{"name": "m", "backend": "llamacpp", "model": "x", "task": "vision"}],
            }
        )


def test_loading_checks_the_class_and_starting_checks_the_packages(scratch_registry):
    @backend("mislabelled")
    def mislabelled() -> type[Backend]:
        return Echo

    with pytest.raises(TypeError, match="backend 'mislabelled' loads Echo, whose name is 'echo'"):
        backend_class("mislabelled")

    @backend("echo", tasks=("vision",))
    def echo_vision() -> type[Backend]:
        return Echo

    with pytest.raises(
        TypeError, match="registered for task vision but Echo does not declare supports_images"
    ):
        backend_class("echo", "vision")

    @backend(
        "needy",
        requires=("ableaudit_no_such_package",),
        install="pip install ableaudit-no-such-package",
    )
    def needy() -> type[Backend]:
        raise AssertionError("a backend missing a package must not be imported")

    t = Target.model_construct(name="n", backend="needy", model="m", task="text", options={})
    with pytest.raises(
        BackendError,
        match="target 'n': backend needy needs ableaudit_no_such_package, which is not "
        "installed; pip install ableaudit-no-such-package",
    ):
        make_backend(t)
    with pytest.raises(ValueError, match="tasks must be some of"):
        backend("x", tasks=("audio",))


def test_importing_the_registry_and_config_loads_no_backend_module():
    code = (
        "import sys\n"
        "from ableaudit.config import Target\n"
        "import ableaudit.backends\n"
        "Target(name='t', backend='transformers', model='m')\n"
        "print(sorted(m for m in sys.modules if m.startswith('ableaudit.backends.')),"
        " 'torch' in sys.modules, 'openai' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "['ableaudit.backends._providers', 'ableaudit.backends.base', "
        "'ableaudit.backends.registry'] False False"
    )
