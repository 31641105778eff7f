"""The response import through Arrow record batches, without dbt: the keys and values it
lands are those of the row-by-row checks (``validate_rows``), bit for bit; a refused row
anywhere, in any batch, lands nothing; a key twice in the file is found across batches;
re-importing lands nothing new; every row carries its landing's id."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet as pq
import pytest

from ableaudit.ingest import response_batches
from ableaudit.ingest.responses import ResponseImportError, import_responses, validate_rows
from ableaudit.warehouse import connect
from ableaudit.warehouse.landing import GENERATION_COLUMNS, recording

DISABILITIES = {
    "hearing": "hearing",
    "hearing impairments": "hearing",
    "vision": "vision",
    "vision impairments": "vision",
}
PROMPTS = {
    ("ableaudit", "edu_001", None): ("ableaudit:edu_001:neutral", "education", "Q?"),
    ("ableaudit", "edu_001", "hearing"): ("ableaudit:edu_001:hearing", "education", "Q deaf?"),
    ("ableaudit", "edu_001", "vision"): ("ableaudit:edu_001:vision", "education", "Q blind?"),
    ("ableaudit", "job_002", None): ("ableaudit:job_002:neutral", "employment", "J?"),
    ("ableaudit", "job_002", "hearing"): ("ableaudit:job_002:hearing", "employment", "J deaf?"),
    ("ünï", 'q"1\\', None): ('ünï:q"1\\:neutral', "éducation", "Ü?"),
}
TEXTS = [
    "A.",
    "",
    None,
    "  \t\n",
    "\x1c\u3000\u2028",  # whitespace only to Python's str.strip
    "\u200b",  # a zero-width space: not whitespace, so an answer
    "日本語の答え 🎉",
    'quote " and \\ backslash',
    "line\nbreak\r\n",
]


@pytest.fixture
def prompted(tmp_path: Path) -> Path:
    """A warehouse with the two relations the import reads, as dbt would build them."""
    wh = tmp_path / "ableaudit.duckdb"
    con = connect(wh)
    try:
        con.execute(
            "create table main.stg_seeds__disabilities "
            "(disability_id varchar, display_name varchar, short_name varchar)"
        )
        con.execute(
            "insert into main.stg_seeds__disabilities values "
            "('hearing', 'Hearing impairments', null), ('vision', 'Vision impairments', null)"
        )
        con.execute(
            "create table main.int_prompts (prompt_id varchar, query_set varchar, "
            "query_id varchar, disability_id varchar, domain varchar, prompt_text varchar)"
        )
        con.executemany(
            "insert into main.int_prompts values (?, ?, ?, ?, ?, ?)",
            [[p[0], k[0], k[1], k[2], p[1], p[2]] for k, p in PROMPTS.items()],
        )
    finally:
        con.close()
    return wh


def _varied(n: int) -> list[dict]:
    """Rows crossing unicode and odd model ids, blank and default values, temperatures that
    JSON writes in several forms, and texts blank or not by Python's rules."""
    models = ["m", " spaced ", "模型-α", 'q"uote\\', "tab\tnew\nline", "e\u0301", "\U0001f916"]
    arms = [None, "", "baseline", "mitigated ", "ärm"]
    temps = [None, 0.0, 0.7, 1e-05, 1e16, 2.5, 0.1 + 0.2, -0.0]
    disabilities = [None, "", "hearing", "Hearing impairments", " vision "]
    rows = []
    for i in range(n):
        dis = disabilities[i % len(disabilities)]
        query_set, query_id = ("ünï", 'q"1\\') if i % 11 == 0 else ("ableaudit", "edu_001")
        if query_set == "ünï":
            dis = None
        elif i % 3 == 0:
            query_id = (
                "job_002" if dis in (None, "", "hearing", "Hearing impairments") else query_id
            )
        rows.append(
            {
                "model_id": models[i % len(models)],
                "query_id": query_id,
                "disability": dis,
                "response_text": TEXTS[i % len(TEXTS)],
                "arm": arms[i % len(arms)],
                "temperature": temps[i % len(temps)],
                "sample_index": i,
                "query_set": query_set,
                "task": ["text", None, " Vision "][i % 3],
            }
        )
    return rows


def _landed(wh: Path) -> list[dict]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        cur = con.execute(
            f"select {', '.join(GENERATION_COLUMNS)} from raw.generations order by generation_id"
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()


def _raw_state(wh: Path) -> dict[str, tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        tables = [
            t
            for (t,) in con.execute(
                "select table_name from information_schema.tables where table_schema = 'raw'"
            ).fetchall()
        ]
        return {
            t: con.execute(f"select count(*), coalesce(sum(hash(t)), 0) from raw.{t} t").fetchone()
            for t in tables
        }
    finally:
        con.close()


def test_whitespace_is_what_python_strips():
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
    assert response_batches.WHITESPACE == every


def test_keys_and_values_match_the_row_checks_bit_for_bit(prompted, tmp_path):
    rows = _varied(400)
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    want = validate_rows(path, list(enumerate(rows, start=1)), DISABILITIES, PROMPTS)
    report = import_responses(path, prompted, batch_rows=64)
    assert report.inserted == len(rows)
    got = _landed(prompted)
    expected = sorted(
        ({c: r.get(c) for c in GENERATION_COLUMNS if c != "landing_id"} for r in want),
        key=lambda r: r["generation_id"],
    )
    assert [{k: v for k, v in r.items() if k != "landing_id"} for r in got] == expected
    # the blank texts by Python's rules are 'empty', the zero-width space is an answer
    status = {r["response_text"]: r["status"] for r in got}
    assert status["\x1c\u3000\u2028"] == "empty" and status["\u200b"] == "ok"
    assert {r["status"] for r in got if r["response_text"] == ""} == {"empty"}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_text_formats_go_through_batches_with_the_same_keys(prompted, tmp_path, fmt):
    rows = [
        {k: ("" if v is None else str(v)) for k, v in r.items()}
        for r in _varied(60)
        if "\n" not in r["model_id"]
    ]
    path = tmp_path / f"r.{fmt}"
    if fmt == "csv":
        pyarrow.csv.write_csv(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
    from ableaudit.ingest.responses import read_numbered

    numbered = read_numbered(path)
    assert response_batches.from_numbered(numbered).batches is not None
    want = validate_rows(path, numbered, DISABILITIES, PROMPTS)
    assert import_responses(path, prompted, batch_rows=16).inserted == len(rows)
    assert [r["generation_id"] for r in _landed(prompted)] == sorted(
        r["generation_id"] for r in want
    )


def _bad_late(tmp_path: Path, n: int, bad_row: int) -> Path:
    rows = [
        {"model_id": "m", "query_id": "edu_001", "disability": "", "response_text": "A."}
        | {"sample_index": i}
        for i in range(n)
    ]
    rows[bad_row - 1]["sample_index"] = -1
    path = tmp_path / "late.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_a_late_bad_row_lands_nothing_and_is_named(prompted, tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(pa.Table.from_pylist(_varied(30)), good)
    import_responses(good, prompted)
    before = _raw_state(prompted)
    path = _bad_late(tmp_path, 1000, 901)
    with pytest.raises(ResponseImportError) as err:
        import_responses(path, prompted, batch_rows=100)
    msg = str(err.value)
    assert msg.startswith(f"{path}: 1 row(s) cannot be imported; nothing was landed")
    assert "sample_index: row 901 (-1): must be a whole number from 0" in msg
    assert _raw_state(prompted) == before


def test_a_key_twice_across_batches_is_named_as_the_rows_name_it(prompted, tmp_path):
    rows = [
        {"model_id": "m", "query_id": "edu_001", "disability": "", "response_text": "A."}
        | {"sample_index": i}
        for i in range(10)
    ]
    rows[8]["sample_index"] = 1  # row 9 repeats row 2, four batches of 3 away
    rows[2]["sample_index"] = 1  # row 3 too, in row 2's batch
    path = tmp_path / "twice.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    want = pytest.raises(ResponseImportError)
    with want:
        validate_rows(path, list(enumerate(rows, start=1)), DISABILITIES, PROMPTS)
    for batch_rows in (3, 2, 100):
        with pytest.raises(ResponseImportError) as err:
            import_responses(path, prompted, batch_rows=batch_rows)
        assert str(err.value) == str(want.excinfo.value)
        assert "row: row 3 ('ableaudit:edu_001'), row 9 ('ableaudit:edu_001')" in str(err.value)
    assert _landed(prompted) == []


def test_reimport_lands_nothing_new_and_every_row_has_its_landing(prompted, tmp_path):
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(_varied(50)), path)
    with recording(prompted, "import-responses", path, file=path) as first:
        report = import_responses(path, prompted, batch_rows=7)
    assert (report.inserted, report.unchanged, report.replaced) == (50, 0, 0)
    with recording(prompted, "import-responses", path, file=path) as second:
        again = import_responses(path, prompted, batch_rows=7)
    assert (again.inserted, again.unchanged, again.replaced) == (0, 50, 0)
    assert {r["landing_id"] for r in _landed(prompted)} == {first.landing_id}
    assert first.rows == {"generations": 50} and second.rows == {}
    con = duckdb.connect(str(prompted), read_only=True)
    kinds = con.execute("select kind, status, row_count from raw.landings").fetchall()
    con.close()
    assert kinds == [("import-responses", "landed", 50)]  # the second brought nothing new


def test_a_changed_text_in_a_later_batch_is_refused_then_replaced(prompted, tmp_path):
    rows = _varied(20)
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    import_responses(path, prompted, batch_rows=6)
    before = _raw_state(prompted)
    old = rows[17]["response_text"]
    rows[17]["response_text"] = "Corrected."
    fixed = tmp_path / "fixed.parquet"
    pq.write_table(pa.Table.from_pylist(rows), fixed)
    with pytest.raises(ResponseImportError) as err:
        import_responses(fixed, prompted, batch_rows=6)
    assert "1 row(s) are already landed with a different response_text" in str(err.value)
    assert "row 18 [" in str(err.value) and "-> file 'Corrected.'" in str(err.value)
    assert _raw_state(prompted) == before
    report = import_responses(fixed, prompted, batch_rows=6, replace=True)
    assert (report.inserted, report.unchanged, report.replaced) == (0, 19, 1)
    con = duckdb.connect(str(prompted), read_only=True)
    history = con.execute("select response_text from raw.generation_history").fetchall()
    con.close()
    assert history == [(old,)]


def test_a_file_arrow_cannot_carry_takes_the_row_path(prompted, tmp_path):
    path = tmp_path / "mixed.jsonl"
    rows = [
        {"model_id": "m", "query_id": "edu_001", "disability": "", "response_text": "A."},
        {"model_id": "m", "query_id": "edu_001", "disability": "", "response_text": "B."}
        | {"sample_index": 1},
        {"model_id": 7, "query_id": "edu_001", "disability": "", "response_text": "C."},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    from ableaudit.ingest.responses import read_numbered

    assert response_batches.from_numbered(read_numbered(path)).batches is None
    assert import_responses(path, prompted).inserted == 3
    assert sorted(r["model_id"] for r in _landed(prompted)) == ["7", "m", "m"]


def test_a_number_past_int64_is_named_by_the_row_checks(prompted, tmp_path):
    path = tmp_path / "big.jsonl"
    rows = [
        {"model_id": "m", "query_id": "edu_001", "disability": "", "response_text": "A."}
        | {"sample_index": n}
        for n in (0, 2**70)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    from ableaudit.ingest.responses import read_numbered

    assert response_batches.from_numbered(read_numbered(path), batch_rows=1).batches is None
    with pytest.raises(
        ResponseImportError, match=r"sample_index: row 2 \(1180591620717411303424\)"
    ):
        import_responses(path, prompted)
    assert _landed(prompted) == []


def _scratch(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".ableaudit-import-"))


def test_the_staged_rows_are_removed_whether_the_file_lands_fails_or_is_refused(
    prompted, tmp_path, monkeypatch
):
    from ableaudit.warehouse import batch_landing

    rows = _varied(40)
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows[:20]), path)
    import_responses(path, prompted, batch_rows=6)
    before = _raw_state(prompted)
    assert _scratch(prompted.parent) == []

    # the landing transaction fails after its insert: nothing of the file stays
    pq.write_table(pa.Table.from_pylist(rows), path)
    staged: list[Path] = []
    real = batch_landing._land_staged

    def failing(con, rows_file, *args):
        staged.append(rows_file)
        assert rows_file.parent.parent == prompted.parent and rows_file.exists()
        monkeypatch.setattr(batch_landing, "_settle", _boom)
        return real(con, rows_file, *args)

    def _boom(*_):
        raise OSError("disk gone")

    monkeypatch.setattr(batch_landing, "_land_staged", failing)
    with pytest.raises(OSError, match="disk gone"):
        import_responses(path, prompted, batch_rows=6)
    assert staged and not staged[0].exists()
    assert _raw_state(prompted) == before
    assert _scratch(prompted.parent) == []

    # refused in its last batch: nothing lands, nothing is left
    monkeypatch.undo()
    with pytest.raises(ResponseImportError):
        import_responses(_bad_late(tmp_path, 40, 39), prompted, batch_rows=6)
    assert _raw_state(prompted) == before
    assert _scratch(prompted.parent) == []

    report = import_responses(path, prompted, batch_rows=6)
    assert (report.inserted, report.unchanged) == (20, 20)
    assert _scratch(prompted.parent) == []


def test_equal_answers_are_staged_side_by_side_and_each_row_group_holds_its_own(
    prompted, tmp_path, monkeypatch
):
    from ableaudit.warehouse import batch_landing

    monkeypatch.setattr(batch_landing, "STAGED_WINDOW_ROWS", 60)
    monkeypatch.setattr(batch_landing, "STAGED_GROUP_ROWS", 20)
    rows = _varied(200)
    for i, r in enumerate(rows):  # 7 answers repeated, then distinct ones, shuffled
        r["response_text"] = f"answer {i % 7}" if i < 120 else f"distinct answer {i}"
    random.Random(3).shuffle(rows)
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)  # one row group
    kept = tmp_path / "staged.parquet"
    real = batch_landing._land_staged

    def keep(con, rows_file, *args):
        shutil.copy(rows_file, kept)
        return real(con, rows_file, *args)

    monkeypatch.setattr(batch_landing, "_land_staged", keep)
    report = import_responses(path, prompted, batch_rows=25)
    assert report.inserted == 200
    landed = sorted((r["sample_index"], r["response_text"]) for r in _landed(prompted))
    assert landed == sorted((r["sample_index"], r["response_text"]) for r in rows)

    staged = pq.ParquetFile(kept, read_dictionary=["response_text"])
    texts = staged.read(columns=["response_text"]).column(0).to_pylist()
    # windows of three batches of 25 rows (the first batches to reach 60 rows), then the rest
    for start, end in ((0, 75), (75, 150), (150, 200)):
        window = texts[start:end]
        runs = 1 + sum(a != b for a, b in zip(window, window[1:], strict=False))
        assert runs == len(set(window)), (start, window)
    assert [staged.metadata.row_group(i).num_rows for i in range(staged.num_row_groups)] == [
        20,
        20,
        20,
        15,
        20,
        20,
        20,
        15,
        20,
        20,
        10,
    ]
    for i in range(staged.num_row_groups):
        column = staged.read_row_group(i, columns=["response_text"]).column(0)
        for chunk in column.chunks:
            assert sorted(chunk.dictionary.to_pylist()) == sorted(set(chunk.to_pylist()))


def test_each_batch_of_a_row_group_encodes_its_own_answers(prompted, tmp_path, monkeypatch):
    """Read as a dictionary, each batch of a row group carried every answer of the batches
    before it: a file of distinct answers grew it without bound."""
    rows = _varied(100)
    for i, r in enumerate(rows):
        r["response_text"] = f"distinct answer {i}"
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    sizes = []
    real = response_batches.normalise

    def normalise(batch, *args):
        out = real(batch, *args)
        sizes.append((out.num_rows, len(out.column("response_text").chunk(0).dictionary)))
        return out

    monkeypatch.setattr(response_batches, "normalise", normalise)
    import_responses(path, prompted, batch_rows=10)
    assert sizes == [(10, 10)] * 10


def test_an_import_gives_back_the_settings_other_connections_to_the_file_share(prompted, tmp_path):
    from ableaudit.warehouse.batch_landing import IMPORT_SETTINGS

    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(_varied(12)), path)
    held = duckdb.connect(str(prompted))  # the same database instance as the import's
    try:
        held.execute("set memory_limit = '2GiB'")  # a value its display gives back

        def settings() -> dict:
            return {
                n: held.execute(f"select current_setting('{n}')").fetchall()[0][0]
                for n in IMPORT_SETTINGS
            }

        before = settings()
        assert before != {n: v for n, v in IMPORT_SETTINGS.items()}
        assert import_responses(path, prompted, batch_rows=5).inserted == 12
        assert settings() == before
    finally:
        held.close()


def test_an_import_removes_what_killed_imports_left_and_keeps_a_running_ones(prompted, tmp_path):
    import os
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = prompted.parent / f".ableaudit-import-{int(done.stdout)}-abc"
    running = prompted.parent / f".ableaudit-import-{os.getpid()}-def"
    for folder in (dead, running):
        folder.mkdir()
        (folder / "rows.parquet").write_bytes(b"half a file")
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(_varied(8)), path)
    assert import_responses(path, prompted).inserted == 8
    assert _scratch(prompted.parent) == [running.name]
