"""`ableaudit import responses`: validate the whole file, then land it, or land nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from ableaudit.cli import main
from ableaudit.dbt.runner import run_dbt
from ableaudit.ingest.responses import ResponseImportError, import_responses

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prompted(tmp_path_factory) -> Path:
    wh = tmp_path_factory.mktemp("prompts") / "ableaudit.duckdb"
    run_dbt(["seed"], wh)
    run_dbt(["build", "--select", "+int_prompts"], wh)
    return wh


@pytest.fixture
def wh(prompted: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ableaudit.duckdb"
    shutil.copy(prompted, copy)
    return copy


def _count(wh: Path) -> int:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute("select count(*) from raw.generations").fetchone()[0]
    finally:
        con.close()


ROWS = [
    {
        "model_id": "gpt-x",
        "query_id": "edu_001",
        "disability": "",
        "response_text": "Make a weekly schedule.",
    },
    {
        "model_id": "gpt-x",
        "query_id": "edu_001",
        "disability": "hearing",
        "response_text": "Use captions.",
    },
    {
        "model_id": "gpt-x",
        "query_id": "edu_001",
        "disability": "Vision impairments",
        "response_text": "Use a screen reader.",
    },
    {
        "model_id": "gpt-x",
        "query_id": "edu_001",
        "disability": "Mental & Behavioral",
        "response_text": "",
    },
]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_import_each_format(wh, tmp_path, fmt):
    df = pd.DataFrame(ROWS)
    path = tmp_path / f"r.{fmt}"
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in ROWS))
    else:
        df.to_parquet(path)
    report = import_responses(path, wh)
    assert report.inserted == 4
    con = duckdb.connect(str(wh), read_only=True)
    got = con.execute(
        "select disability_id, condition, status, source, arm, sample_index from raw.generations order by disability_id nulls first"
    ).fetchall()
    con.close()
    assert got == [
        (None, "neutral", "ok", "imported", "baseline", 0),
        ("hearing", "disability", "ok", "imported", "baseline", 0),
        ("mental_behavioral", "disability", "empty", "imported", "baseline", 0),
        ("vision", "disability", "ok", "imported", "baseline", 0),
    ]
    again = import_responses(path, wh)
    assert (again.inserted, again.unchanged) == (0, 4) and _count(wh) == 4


def test_unknown_ids_land_nothing(wh, tmp_path):
    bad = ROWS + [
        {"model_id": "gpt-x", "query_id": "nope_999", "disability": "", "response_text": "x"},
        {
            "model_id": "gpt-x",
            "query_id": "edu_001",
            "disability": "telepathy",
            "response_text": "x",
        },
    ]
    path = tmp_path / "bad.csv"
    pd.DataFrame(bad).to_csv(path, index=False)
    with pytest.raises(ResponseImportError) as err:
        import_responses(path, wh)
    msg = str(err.value)
    assert (
        "2 row(s)" in msg
        and "nope_999" in msg
        and "telepathy" in msg
        and "nothing was landed" in msg
    )
    assert _count(wh) == 0


def test_missing_column_is_named(wh, tmp_path):
    path = tmp_path / "m.csv"
    pd.DataFrame([{"model_id": "m", "query_id": "edu_001", "response_text": "x"}]).to_csv(
        path, index=False
    )
    with pytest.raises(ResponseImportError, match=r"lacks required column\(s\) \['disability'\]"):
        import_responses(path, wh)


def test_duplicate_rows_are_refused(wh, tmp_path):
    path = tmp_path / "d.csv"
    pd.DataFrame([ROWS[0], ROWS[0]]).to_csv(path, index=False)
    with pytest.raises(ResponseImportError, match="duplicates row 2"):
        import_responses(path, wh)


def test_cli_reports_errors_in_one_line(wh, tmp_path, capsys):
    path = tmp_path / "x.txt"
    path.write_text("hello")
    assert main(["import", "responses", str(path), "--warehouse", str(wh)]) == 2
    assert "unsupported file type" in capsys.readouterr().err


def test_cli_exports_an_annotation_sample_and_imports_it_back(wh, tmp_path, capsys):
    path = tmp_path / "r.csv"
    pd.DataFrame(ROWS).to_csv(path, index=False)
    import_responses(path, wh)
    out = tmp_path / "sample"
    assert (
        main(
            [
                "export",
                "annotation-sample",
                str(out),
                "--size-per-domain",
                "2",
                "--warehouse",
                str(wh),
            ]
        )
        == 0
    )
    items = pd.read_csv(out / "items.csv")
    assert len(items) == 2 and (out / "instructions.md").read_text().strip()
    items["annotator_id"] = "ann1"
    items["judge_score"] = [7, 3]
    filled = tmp_path / "filled.csv"
    items.to_csv(filled, index=False)
    assert main(["import", "annotations", str(filled), "--warehouse", str(wh)]) == 0
    con = duckdb.connect(str(wh), read_only=True)
    try:
        got = sorted(con.execute("select value_num from raw.annotations").fetchall())
    finally:
        con.close()
    assert got == [(3.0,), (7.0,)]
