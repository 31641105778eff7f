"""Commands that read a warehouse refuse a path where there is none, naming the closest file
beside it, before anything reads or creates a file; an audit and an import create one."""

from __future__ import annotations

import duckdb
import pytest

from ableaudit.cli.main import main

READERS = [
    ["build"],
    ["publish"],
    ["report"],
    ["gate"],
    ["history"],
    ["forget", "landing-x"],
    ["view", "--port", "0"],
    ["export", "annotation-sample", "sample"],
    ["export", "preference-pairs", "pairs"],
    ["score"],
    ["judge", "--config", "configs/default.yaml"],
    ["queryset", "export-review", "qs"],
]


@pytest.fixture
def folder(tmp_path):
    wh = tmp_path / "warehouse"
    wh.mkdir()
    duckdb.connect(str(wh / "ableaudit.duckdb")).close()
    return wh


@pytest.mark.parametrize("argv", READERS, ids=lambda a: " ".join(a[:2]))
def test_a_typo_is_refused_with_the_file_beside_it(argv, folder, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    typo = folder / "ablaudit.duckdb"
    code = main([*argv, "--warehouse", str(typo)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"no warehouse at {typo}" in err
    assert f"did you mean {str(folder / 'ableaudit.duckdb')!r}" in err
    assert "Traceback" not in err
    assert not typo.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["ableaudit.duckdb"]


def test_a_typo_in_the_folder_names_the_folder_beside_it(folder, tmp_path, capsys):
    typo = tmp_path / "warehuose" / "ableaudit.duckdb"
    assert main(["build", "--warehouse", str(typo)]) == 2
    err = capsys.readouterr().err
    assert f"did you mean {str(folder / 'ableaudit.duckdb')!r}" in err
    assert not typo.parent.exists()


def test_nothing_close_names_no_file(tmp_path, capsys):
    missing = tmp_path / "elsewhere.duckdb"
    assert main(["publish", "--warehouse", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"no warehouse at {missing}: it does not exist;" in err and "did you mean" not in err
