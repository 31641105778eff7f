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
from ableaudit.warehouse.landing import land_generations

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


def _csv(tmp_path: Path, rows: list[dict], name: str = "r.csv") -> Path:
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_values_the_marts_cannot_hold_land_nothing(wh, tmp_path, capsys):
    bad = [
        dict(ROWS[0], task="banana"),
        dict(ROWS[1], temperature="-5"),
        dict(ROWS[2], sample_index="99999999999"),
        dict(ROWS[3], temperature="nan"),
    ]
    path = _csv(tmp_path, bad, "bad.csv")
    assert main(["import", "responses", str(path), "--warehouse", str(wh)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 4 row(s) cannot be imported; nothing was landed" in err
    assert "task: row 2 ('banana'): must be 'text' or 'vision'" in err
    assert "temperature: row 3 ('-5'), row 5 ('nan'): must be a finite number >= 0" in err
    assert "sample_index: row 4 ('99999999999'): must be a whole number from 0 to" in err
    assert _count(wh) == 0


def test_an_object_as_response_text_is_refused(wh, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(dict(ROWS[1], response_text={"a": 1})))
    with pytest.raises(ResponseImportError, match=r"response_text: row 2 \(\{'a': 1\}\)"):
        import_responses(path, wh)
    assert _count(wh) == 0


def _history(wh: Path) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute("select response_text from raw.generation_history").fetchall()
    finally:
        con.close()


def _texts(wh: Path) -> list[str]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return [
            t
            for (t,) in con.execute(
                "select response_text from raw.generations order by response_text"
            ).fetchall()
        ]
    finally:
        con.close()


def test_a_corrected_file_is_refused_until_replace(wh, tmp_path, capsys):
    first = _csv(tmp_path, ROWS[:2], "first.csv")
    assert main(["import", "responses", str(first), "--warehouse", str(wh)]) == 0
    fixed = _csv(tmp_path, [ROWS[0], dict(ROWS[1], response_text="Use live captions.")], "fix.csv")
    capsys.readouterr()
    assert main(["import", "responses", str(fixed), "--warehouse", str(wh)]) == 2
    err = capsys.readouterr().err
    assert "1 row(s) are already landed with a different response_text" in err
    assert "row 3 [" in err and "ableaudit:edu_001:hearing" in err
    assert "landed 'Use captions.' -> file 'Use live captions.'" in err and "--replace" in err
    assert _texts(wh) == ["Make a weekly schedule.", "Use captions."]

    assert main(["import", "responses", str(fixed), "--warehouse", str(wh), "--replace"]) == 0
    assert "0 new, 1 already present, 1 replaced" in capsys.readouterr().out
    assert _texts(wh) == ["Make a weekly schedule.", "Use live captions."]
    assert _history(wh) == [("Use captions.",)]

    again = import_responses(fixed, wh)
    assert (again.inserted, again.unchanged, again.replaced) == (0, 2, 0) and _count(wh) == 2


def _land_generated(wh: Path, generation_id: str, temperature: float | None) -> None:
    """One answer an audit generated for model_id 'audited' (edu_001, hearing)."""
    row = {
        "generation_id": generation_id,
        "task": "text",
        "target": "audited",
        "model_id": "audited",
        "backend": "llamacpp",
        "arm": "baseline",
        "query_set": "ableaudit",
        "query_id": "edu_001",
        "disability_id": "hearing",
        "condition": "disability",
        "prompt_id": "ableaudit:edu_001:hearing",
        "prompt_text": "x",
        "temperature": temperature,
        "sample_index": 0,
        "status": "ok",
        "response_text": "y",
        "source": "generated",
    }
    land_generations(wh, [row])


def test_rows_on_an_audited_unit_are_refused(wh, tmp_path):
    _land_generated(wh, "generated-1", temperature=None)
    rows = [dict(r, model_id="audited") for r in ROWS]
    with pytest.raises(ResponseImportError) as err:
        import_responses(_csv(tmp_path, rows), wh)
    msg = str(err.value)
    assert "model_id: rows 3: an audit already generated" in msg
    assert "import under a distinct model_id (e.g. 'audited-imported')" in msg
    assert _count(wh) == 1
    renamed = [dict(r, model_id="audited-imported") for r in ROWS]
    assert import_responses(_csv(tmp_path, renamed, "ok.csv"), wh).inserted == 4


def test_import_queries_refuses_the_builtin_name_and_a_missing_file(wh, tmp_path, capsys):
    sample = Path(__file__).resolve().parents[1] / "data" / "accesseval_sample.csv"
    args = ["import", "queries", str(sample), "--warehouse", str(wh)]
    assert main(args + ["--query-set", "ableaudit"]) == 2
    assert "'ableaudit' is built in" in capsys.readouterr().err
    missing = tmp_path / "missing.csv"
    assert main(["import", "queries", str(missing), "--warehouse", str(wh)]) == 2
    assert f"{missing} does not exist" in capsys.readouterr().err
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("select count(*) from raw.external_queries").fetchone()[0] == 0
    finally:
        con.close()


def test_an_accepted_import_keeps_the_build_green(wh, tmp_path):
    """Every optional column at its edge, then the dbt tests on what the import feeds."""
    rows = [
        dict(
            r,
            task="text",
            arm="baseline",
            temperature="0",
            sample_index="2147483647",
            condition="neutral" if not r["disability"] else "disability",
            domain="education",
        )
        for r in ROWS
    ]
    assert import_responses(_csv(tmp_path, rows), wh).inserted == 4
    run_dbt(["build", "--select", "stg_raw__generations", "int_pairs"], wh)
    con = duckdb.connect(str(wh), read_only=True)
    try:
        pairs = con.execute("select count(*) from main.int_pairs").fetchone()[0]
    finally:
        con.close()
    assert pairs == 3


def test_rows_without_a_temperature_on_an_audited_unit_are_refused(wh, tmp_path):
    """A blank temperature means any: it meets the unit generated at 0.7, and both answers
    would form the pair of that unit (the model's n_pairs would count it twice)."""
    _land_generated(wh, "generated-07", temperature=0.7)
    rows = [dict(r, model_id="audited") for r in ROWS]  # no temperature column
    with pytest.raises(ResponseImportError) as err:
        import_responses(_csv(tmp_path, rows), wh)
    assert "model_id: rows 3: an audit already generated" in str(err.value)
    mixed = tmp_path / "mixed.jsonl"  # a column of mixed types: checked row by row
    mixed.write_text(
        "\n".join(json.dumps(dict(r, sample_index=[0, "0"][i % 2])) for i, r in enumerate(rows))
    )
    with pytest.raises(ResponseImportError) as err:
        import_responses(mixed, wh)
    assert "an audit already generated" in str(err.value)
    assert _count(wh) == 1
    at = [dict(r, model_id="audited", temperature=0.2) for r in ROWS]  # another temperature
    assert import_responses(_csv(tmp_path, at, "t.csv"), wh).inserted == 4


def test_an_answer_over_131072_characters_lands_whole(wh, tmp_path, capsys):
    long = "A very long answer. " * 10_000  # 200,000 characters
    rows = [dict(ROWS[0], response_text=long), *ROWS[1:]]
    path = _csv(tmp_path, rows)
    assert main(["import", "responses", str(path), "--warehouse", str(wh)]) == 0, (
        capsys.readouterr().err
    )
    con = duckdb.connect(str(wh), read_only=True)
    try:
        got = con.execute("select max(length(response_text)) from raw.generations").fetchone()
    finally:
        con.close()
    assert got == (len(long),)
