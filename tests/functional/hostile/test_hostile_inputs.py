"""Every file of the hostile-input corpus is refused by `ableaudit import ...` with one message
naming the file, the row or line and the fix, no traceback, and the raw tables exactly as
they were (row counts and a checksum), with good data of every kind landed first.

The commands run in-process through the CLI's main(). The prompts are built once for the
module; the responses import's own `dbt build` of them is skipped, as they are already there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest

import ableaudit.cli.main  # noqa: F401 - the module, reached through sys.modules below
from ableaudit.cli import imports as import_cli
from ableaudit.dbt.runner import run_dbt
from tests.fixtures.warehouse import imported_row, land
from tests.functional.hostile.cases import (
    AUDITED_MODEL,
    CASES,
    GOOD_MODEL,
    GOOD_QUERY,
    IMAGE_SET,
    JUDGMENT_HEADER,
    MANIFEST_HEADER,
    OK_PNG,
    QUERY_HEADER,
    RESPONSE_HEADER,
    Case,
    World,
    write,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

CLI = sys.modules["ableaudit.cli.main"]
ROOT = Path(__file__).resolve().parents[3]


def run(capsys: pytest.CaptureFixture, argv: list[str], warehouse: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = CLI.main([*argv, "--warehouse", str(warehouse)])
    out = capsys.readouterr()
    return code, out.out + out.err


def raw_state(warehouse: Path) -> dict[str, tuple[int, int]]:
    """(rows, checksum of every column of every row) per raw table."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        tables = [
            t
            for (t,) in con.execute(
                "select table_name from information_schema.tables "
                "where table_schema = 'raw' order by 1"
            ).fetchall()
        ]
        return {
            t: tuple(
                con.execute(f"select count(*), coalesce(sum(hash(t)), 0) from raw.{t} t").fetchone()
            )
            for t in tables
        }
    finally:
        con.close()


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory, dbt_env) -> tuple[Path, World]:
    """A warehouse with prompts and good data in every raw table an import writes."""
    d = tmp_path_factory.mktemp("hostile")
    wh = d / "ableaudit.duckdb"
    run_dbt(["seed"], wh)
    run_dbt(["build", "--select", "+int_prompts"], wh)
    generated = imported_row(
        AUDITED_MODEL, "baseline", "edu_001", "education", "hearing", "ok", "A."
    )
    land(wh, [{**generated, "source": "generated", "backend": "transformers"}])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(import_cli, "_ensure_prompts", lambda warehouse: None)
        answers = write(
            d,
            "good.csv",
            f"{RESPONSE_HEADER}\n{GOOD_MODEL},edu_001,,Plan ahead.\n"
            f"{GOOD_MODEL},edu_001,hearing,Use captions.\n",
        )
        assert CLI.main(["import", "responses", str(answers), "--warehouse", str(wh)]) == 0
        con = duckdb.connect(str(wh), read_only=True)
        ids = dict(
            con.execute(
                "select condition, generation_id from raw.generations where model_id = ?",
                [GOOD_MODEL],
            ).fetchall()
        )
        con.close()
        world = World(neutral_id=ids["neutral"], hearing_id=ids["disability"])
        good = [
            ["import", "queries", str(write(d, "q.csv", f"{QUERY_HEADER}\n{GOOD_QUERY}\n"))],
            [
                "import",
                "images",
                str(write(d, "m.csv", f"{MANIFEST_HEADER}\na,a.png,chef,man,black\n")),
                "--image-root",
                str(write(d, "img/a.png", OK_PNG).parent),
                "--image-set",
                IMAGE_SET,
            ],
            [
                "import",
                "judgments",
                str(write(d, "v.csv", f"{JUDGMENT_HEADER}\nj,q,rubric,{world.neutral_id},7\n")),
            ],
            [
                "import",
                "annotations",
                str(
                    write(
                        d,
                        "r.csv",
                        f"item_id,annotator_id,judge_score\n{world.neutral_id},ann0,7\n",
                    )
                ),
            ],
        ]
        for argv in good:
            assert CLI.main([*argv, "--warehouse", str(wh)]) == 0, argv
        yield wh, world


def test_good_data_landed_in_every_table_the_corpus_aims_at(landed):
    wh, _ = landed
    state = raw_state(wh)
    for table in ("generations", "external_queries", "images", "judgments", "annotations"):
        assert state[table][0] > 0, table


def test_the_corpus_covers_every_import_command():
    counts: dict[str, int] = {}
    for case in CASES:
        counts[case.command] = counts.get(case.command, 0) + 1
    assert set(counts) == {"responses", "queries", "images", "annotations", "judgments"}
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)
    # docs/testing.md lists the corpus; its counts follow the table
    page = " ".join((ROOT / "docs" / "testing.md").read_text().split())
    assert f"{len(CASES)} import cases" in page
    for command, n in counts.items():
        assert f"{command} {n}" in page, (command, n)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_file_is_refused_with_one_message_and_lands_nothing(
    case: Case, landed, tmp_path: Path, capsys, monkeypatch
):
    wh, world = landed
    monkeypatch.setattr(import_cli, "_ensure_prompts", lambda warehouse: None)
    argv = case.build(tmp_path, world)
    before = raw_state(wh)
    code, output = run(capsys, argv, wh)
    assert code != 0, output
    assert "Traceback" not in output
    missing = [f for f in case.expect if f not in output]
    assert not missing, f"{missing} not in:\n{output}"
    assert raw_state(wh) == before
