"""The gates file parser: defaults, and one clear line per mistake."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ableaudit import PROJECT_ROOT
from ableaudit.gates.rules import KINDS, GateFileError, load_gates, parse_rules


def test_the_example_file_has_every_kind_and_parses():
    rules = load_gates(PROJECT_ROOT / "configs" / "gates.example.yml")
    assert {r.kind for r in rules} == set(KINDS)
    assert {r.severity for r in rules} == {"error", "warn"}
    assert len({r.id for r in rules}) == len(rules)


def test_defaults_are_filled_in():
    (rule,) = parse_rules(
        {"rules": [{"kind": "degradation_max", "metric": "vader", "max_pct": 30}]}
    )
    assert rule.id == "degradation_max-1"
    assert (rule.severity, rule.min_pairs, rule.allow_inconclusive) == ("error", 20, False)
    assert rule.params == {"metric": "vader", "max_pct": 30, "slice": "overall"}
    (rule,) = parse_rules({"rules": [{"kind": "judge_drop", "max_drop": 0.5}]})
    assert rule.params == {"max_drop": 0.5, "alpha": 0.05, "slice": "disability"}


def mistakes(data) -> list[str]:
    with pytest.raises(GateFileError) as err:
        parse_rules(data, "gates.yml")
    lines = str(err.value).splitlines()
    assert lines[0].startswith("gates.yml: ")
    assert all(line.startswith("  - ") for line in lines[1:])
    return [line[4:] for line in lines[1:]]


def test_unknown_kind_suggests_the_closest():
    (line,) = mistakes({"rules": [{"id": "a", "kind": "degradation_maxx", "metric": "vader"}]})
    assert "rule 1 (a): unknown rule kind 'degradation_maxx'" in line
    assert "did you mean 'degradation_max'?" in line


def test_every_mistake_is_reported_once_each():
    found = mistakes(
        {
            "rules": [
                {"kind": "degradation_max", "metric": "vader"},
                {"kind": "judge_drop", "max_drop": 0.5, "severity": "fatal", "alfa": 0.01},
                {"kind": "no_regression", "against": "previous", "min_pairs": "many"},
                {"id": "x", "kind": "interpretive_shift_max", "max_pct": 120},
                {
                    "id": "x",
                    "kind": "interpretive_shift_max",
                    "max_pct": 20,
                    "dimension": "interpet",
                },
                "degradation_max",
            ]
        }
    )
    assert len(found) == 8, found
    assert "rule 1: missing threshold 'max_pct'" in found[0]
    assert "rule 2: 'severity' is 'fatal'" in found[1] and "error, warn" in found[1]
    assert "rule 2: unknown field 'alfa'" in found[2] and "did you mean 'alpha'?" in found[2]
    assert "rule 3: 'min_pairs' must be a number" in found[3]
    assert "rule 4 (x): 'max_pct' is 120; it must be from 0 to 100" in found[4]
    assert any("'dimension' is 'interpet' (did you mean 'interpret'?)" in f for f in found)
    assert any("rule 5 (x): id 'x' is already used by rule 4" in f for f in found)
    assert "rule 6: expected a mapping" in found[-1]


def test_the_top_level_must_hold_rules():
    with pytest.raises(GateFileError, match="expected a mapping with a `rules:` list"):
        parse_rules([{"kind": "judge_drop"}], "g.yml")
    with pytest.raises(GateFileError, match="must be a non-empty list"):
        parse_rules({"rules": []}, "g.yml")
    assert any(
        "unknown top-level key 'rule'" in m
        for m in mistakes({"rules": [{"kind": "judge_drop", "max_drop": 1}], "rule": 1})
    )


def test_a_missing_file_and_bad_yaml_say_where(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="no gates file at"):
        load_gates(tmp_path / "nope.yml")
    bad = tmp_path / "bad.yml"
    bad.write_text("rules:\n  - kind: [unclosed\n")
    with pytest.raises(GateFileError, match=r"bad.yml: not valid YAML at line \d+"):
        load_gates(bad)


def test_rules_round_trip_through_a_dict():
    from ableaudit.gates.rules import GateRule

    rules = parse_rules(
        yaml.safe_load((PROJECT_ROOT / "configs" / "gates.example.yml").read_text())
    )
    assert [GateRule.from_dict(r.to_dict()) for r in rules] == rules


def test_the_audit_config_names_its_gates_file(tmp_path: Path):
    from ableaudit.config import ConfigError, parse_config

    target = {"name": "t", "backend": "openai", "model": "m"}
    cfg = parse_config({"targets": [target], "gates": "configs/gates.example.yml"}, "a.yaml")
    assert cfg.gates_path() == (PROJECT_ROOT / "configs" / "gates.example.yml").resolve()
    (tmp_path / "mine.yml").write_text("rules: []\n")
    beside = parse_config({"targets": [target], "gates": "mine.yml"}, "a.yaml")
    assert beside.gates_path(tmp_path / "a.yaml") == (tmp_path / "mine.yml").resolve()
    assert parse_config({"targets": [target]}, "a.yaml").gates_path() is None
    missing = parse_config({"targets": [target], "gates": "nope.yml"}, "a.yaml")
    with pytest.raises(ConfigError, match="gates: 'nope.yml' is not a file"):
        missing.gates_path()
