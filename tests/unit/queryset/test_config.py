"""The build config: one message per wrong field, and what a build's name becomes."""

from __future__ import annotations

import pytest

from ableaudit.config import ConfigError
from ableaudit.queryset.config import load_build_config, parse_build_config


def test_the_example_config_loads_and_names_its_set():
    cfg = load_build_config("configs/queryset.example.yaml")
    assert cfg.query_set == "helpdesks@1"
    assert cfg.generator.backend == "llamacpp" and cfg.structured  # llama.cpp honours schemas


def test_wrong_fields_are_named_with_their_fix():
    with pytest.raises(ConfigError) as err:
        parse_build_config(
            {
                "name": "ableaudit",
                "domains": [
                    {"id": "Retail Banking", "description": "x"},
                    {"id": "a", "description": ""},
                ],
                "personas_per_domain": 0,
            }
        )
    text = str(err.value)
    assert "invalid query-set config" in text
    assert "'Retail Banking' must be lower case" in text
    assert "domains.1.description" in text and "personas_per_domain" in text
    with pytest.raises(ConfigError, match="given twice: teller"):
        parse_build_config(
            {
                "name": "s",
                "domains": [
                    {"id": "a", "description": "x", "seed_personas": ["Teller", "teller "]}
                ],
            }
        )
    with pytest.raises(ConfigError, match="built-in query set"):
        parse_build_config({"name": "ableaudit", "domains": [{"id": "a", "description": "x"}]})
    with pytest.raises(ConfigError, match="structured_output: on needs"):
        parse_build_config(
            {
                "name": "s",
                "domains": [{"id": "a", "description": "x"}],
                "generator": {"backend": "transformers", "model": "m"},
                "structured_output": "on",
            }
        )


def test_stored_config_has_no_url_credentials():
    cfg = parse_build_config(
        {
            "name": "s",
            "domains": [{"id": "a", "description": "x"}],
            "generator": {"backend": "openai", "model": "m", "base_url": "https://u:secret@h/v1"},
        }
    )
    assert "secret" not in cfg.stored_json() and "https://h/v1" in cfg.stored_json()
