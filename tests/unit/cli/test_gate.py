"""`ableaudit gate`: a mistake is one message and exit status 2, before dbt runs."""

from __future__ import annotations

import duckdb

from ableaudit.cli.main import main


def test_a_bad_gates_file_is_one_message_listing_each_mistake(tmp_path, capsys):
    duckdb.connect(str(tmp_path / "w.duckdb")).close()
    gates = tmp_path / "gates.yml"
    gates.write_text("rules:\n  - kind: degradation_maxx\n  - kind: judge_drop\n")
    code = main(["gate", "--warehouse", str(tmp_path / "w.duckdb"), "--gates", str(gates)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"ableaudit: error: {gates}: 2 mistakes:")
    assert "did you mean 'degradation_max'?" in err and "missing threshold 'max_drop'" in err


def test_a_config_without_gates_says_what_to_add(tmp_path, capsys):
    duckdb.connect(str(tmp_path / "w.duckdb")).close()
    config = tmp_path / "audit.yaml"
    config.write_text("targets:\n  - name: t\n    backend: openai\n    model: m\n")
    code = main(["gate", "--warehouse", str(tmp_path / "w.duckdb"), "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2 and "has no `gates:`" in err


def test_a_warehouse_without_verdicts_is_one_message(tmp_path, capsys):
    code = main(["gate", "--warehouse", str(tmp_path / "none.duckdb")])
    assert code == 2 and "no warehouse at" in capsys.readouterr().err
