"""The command line: a version, help on every flag, and a missing input file named before any slow step."""

from __future__ import annotations

import argparse
import time

import pytest

from ableaudit import __version__
from ableaudit.cli.main import build_parser, main


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"ableaudit {__version__}"


def test_every_flag_and_argument_has_help():
    missing = [
        f"{p.prog} {a.dest}"
        for p in _parsers(build_parser())
        for a in p._actions
        if not isinstance(
            a, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)
        )
        and not a.help
    ]
    assert missing == []


def test_a_missing_responses_file_is_named_in_seconds(tmp_path, capsys):
    start = time.monotonic()
    code = main(
        [
            "import",
            "responses",
            str(tmp_path / "missing.csv"),
            "--warehouse",
            str(tmp_path / "wh.duckdb"),
        ]
    )
    assert code == 2 and time.monotonic() - start < 5
    assert "missing.csv does not exist" in capsys.readouterr().err
    assert not (tmp_path / "wh.duckdb").exists()


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (bytes(range(256)), "line 1 holds a NUL byte"),
        (b"model_id;query_id;disability;response_text\nm;edu_001;;A.\n", "separated by semicolons"),
        (b"model_id,query_id,disability,respons_text\nm,edu_001,,A.\n", "lacks required column"),
    ],
)
def test_a_broken_responses_file_is_named_before_the_prompts_are_built(
    tmp_path, capsys, content, fragment
):
    path = tmp_path / "answers.csv"
    path.write_bytes(content)
    code = main(["import", "responses", str(path), "--warehouse", str(tmp_path / "wh.duckdb")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{path}" in err and fragment in err and "Traceback" not in err
    assert not (tmp_path / "wh.duckdb").exists()


def test_the_resume_hint_is_the_same_command_without_url_credentials():
    from ableaudit.cli.audit import _same_command

    argv = ["audit", "--config", "my audit.yaml", "--warehouse", "wh.duckdb"]
    assert _same_command(argparse.Namespace(argv=argv)) == (
        "ableaudit audit --config 'my audit.yaml' --warehouse wh.duckdb"
    )
    shown = _same_command(
        argparse.Namespace(argv=["audit", "--base-url", "http://user:s3cret@host:8000/v1"])
    )
    assert "s3cret" not in shown and "http://host:8000/v1" in shown
    assert "credentials you gave, left out" in shown
