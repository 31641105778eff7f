"""`ableaudit score`: what it refuses before Prefect starts, in one message."""

from __future__ import annotations

import pytest

from ableaudit.cli.main import main


def test_a_missing_warehouse_is_named_and_nothing_starts(tmp_path, capsys):
    missing = tmp_path / "nowhere.duckdb"
    assert main(["score", "--warehouse", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"no warehouse at {missing}" in err and "Traceback" not in err
    assert not missing.exists()


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--scorer", "regardv3"], "invalid choice: 'regardv3'"),
        (["--task-runner", "ray"], "invalid choice: 'ray'"),
        (["--workers", "0"], "'0': give a whole number, 1 or more"),
        (["--batch-size", "many"], "'many': give a whole number, 1 or more"),
    ],
)
def test_bad_flags_are_refused_by_name(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(["score", "--warehouse", str(tmp_path / "w.duckdb"), *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
