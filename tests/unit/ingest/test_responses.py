"""The response import's checks, without dbt: every value the marts cannot hold is refused
with one message naming the file, the rows, the field and the fix; a changed text and a
generated unit are refused; a replacement keeps the old row in raw.generation_history."""

from __future__ import annotations

import json
import math
import re

import pytest

from ableaudit.ingest import querysets
from ableaudit.ingest.querysets import (
    BUILTIN_QUERY_SETS,
    LoadedQuerySet,
    QuerySetError,
    check_query_set_name,
    land_query_set,
)
from ableaudit.ingest.responses import (
    INT32_MAX,
    REQUIRED,
    FieldError,
    ResponseImportError,
    changed_texts,
    parse_response_text,
    parse_sample_index,
    parse_task,
    parse_temperature,
    read_numbered,
    refuse_changed,
    refuse_generated_units,
    require_columns,
    validate_rows,
)
from ableaudit.warehouse import connect
from ableaudit.warehouse.landing import land_imported_generations

DISABILITIES = {"hearing": "hearing", "hearing impairments": "hearing", "vision": "vision"}
PROMPTS = {
    ("ableaudit", "edu_001", None): ("ableaudit:edu_001:neutral", "education", "Q?"),
    ("ableaudit", "edu_001", "hearing"): ("ableaudit:edu_001:hearing", "education", "Q deaf?"),
    ("ableaudit", "edu_001", "vision"): ("ableaudit:edu_001:vision", "education", "Q blind?"),
}


def _row(**over) -> dict:
    row = {"model_id": "m", "query_id": "edu_001", "disability": "", "response_text": "A."}
    row.update(over)
    return row


def _validate(*rows: dict) -> list[dict]:
    return validate_rows("f.csv", list(enumerate(rows, start=2)), DISABILITIES, PROMPTS)


def _refused(*rows: dict) -> str:
    with pytest.raises(ResponseImportError) as err:
        _validate(*rows)
    return str(err.value)


# --------------------------------------------------------------------------- single fields


@pytest.mark.parametrize("value", ["banana", "TEXTS", 3, {"a": 1}])
def test_task_must_be_text_or_vision(value):
    with pytest.raises(FieldError, match="'text' or 'vision'"):
        parse_task(value)


@pytest.mark.parametrize(("value", "want"), [(None, "text"), ("", "text"), (" Vision ", "vision")])
def test_task_default_and_spelling(value, want):
    assert parse_task(value) == want


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "-5", -0.1, math.nan, "hot", True])
def test_temperature_must_be_finite_and_non_negative(value):
    with pytest.raises(FieldError, match="finite number >= 0"):
        parse_temperature(value)


@pytest.mark.parametrize(("value", "want"), [(None, None), ("", None), ("0", 0.0), (0.7, 0.7)])
def test_temperature_accepts_numbers_and_unknown(value, want):
    assert parse_temperature(value) == want


@pytest.mark.parametrize(
    "value", ["99999999999", 99999999999, INT32_MAX + 1, "-1", -1, "1.5", 1.5, "two", True]
)
def test_sample_index_is_a_whole_number_within_int32(value):
    with pytest.raises(FieldError, match=f"whole number from 0 to {INT32_MAX}"):
        parse_sample_index(value)


@pytest.mark.parametrize(
    ("value", "want"), [(None, 0), ("", 0), ("3", 3), (2.0, 2), (INT32_MAX, INT32_MAX)]
)
def test_sample_index_accepts_whole_numbers(value, want):
    assert parse_sample_index(value) == want


@pytest.mark.parametrize("value", [{"text": "hi"}, ["hi"], 42, 1.5, True])
def test_response_text_must_be_a_string_or_null(value):
    with pytest.raises(FieldError, match="string .* or null"):
        parse_response_text(value)


def test_response_text_null_is_an_empty_answer():
    assert parse_response_text(None) == "" and parse_response_text(" x ") == " x "


# --------------------------------------------------------------------------- whole files


def test_a_good_file_becomes_landing_rows():
    rows = _validate(
        _row(),
        _row(disability="Hearing impairments", temperature="0.7", sample_index="1", task="text"),
        _row(disability="vision", response_text=None, condition="disability", domain="Education"),
    )
    assert [(r["disability_id"], r["condition"], r["status"]) for r in rows] == [
        (None, "neutral", "ok"),
        ("hearing", "disability", "ok"),
        ("vision", "disability", "empty"),
    ]
    assert rows[1]["temperature"] == 0.7 and rows[1]["sample_index"] == 1
    assert len({r["generation_id"] for r in rows}) == 3


def test_one_message_names_file_rows_field_and_fix():
    msg = _refused(
        _row(task="banana"),
        _row(task="banana", disability="hearing"),
        _row(temperature="nan", disability="vision"),
        _row(sample_index="99999999999", sample_index_note="x"),
        _row(response_text={"a": 1}, arm="other"),
        _row(disability="telepathy"),
        _row(query_id="nope_999"),
    )
    assert msg.startswith("f.csv: 7 row(s) cannot be imported; nothing was landed")
    lines = msg.splitlines()[1:]
    assert len(lines) == 6  # the two task rows share one line
    task_line = next(line for line in lines if line.strip().startswith("task:"))
    assert "row 2 ('banana')" in task_line and "row 3 ('banana')" in task_line
    assert "'text' or 'vision'" in task_line
    assert re.search(r"temperature: row 4 \('nan'\): must be a finite number >= 0", msg)
    assert re.search(r"sample_index: row 5 \('99999999999'\): must be a whole number", msg)
    assert re.search(r"response_text: row 6 \(\{'a': 1\}\): must be a string", msg)
    assert "disability: row 7 ('telepathy'): unknown disability" in msg
    assert "query_id: row 8 ('nope_999'): no such query in query set 'ableaudit'" in msg


def test_many_rows_of_one_problem_are_counted_not_listed():
    msg = _refused(*[_row(temperature="-5", sample_index=str(n)) for n in range(8)])
    assert "row 6 ('-5')" in msg and "row 7" not in msg and "and 3 more" in msg


def test_condition_and_domain_must_agree_with_the_taxonomy():
    msg = _refused(
        _row(condition="disability"),
        _row(disability="hearing", condition="neutral"),
        _row(disability="vision", domain="finance"),
    )
    assert "condition: row 2 ('disability'), row 3 ('neutral'): must agree with disability" in msg
    assert "domain: row 4 ('finance'): must be the query's own domain" in msg


def test_empty_model_and_duplicates_are_refused():
    msg = _refused(_row(model_id=" "), _row(), _row())
    assert "model_id: row 2 (' '): must name the model" in msg
    assert "row: row 4 ('ableaudit:edu_001'): duplicates row 3" in msg


def test_jsonl_keeps_json_types_so_an_object_is_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(
        json.dumps(_row()) + "\n\n" + json.dumps(_row(response_text={"a": 1}, sample_index=1))
    )
    numbered = read_numbered(path)
    assert [n for n, _ in numbered] == [1, 3]
    with pytest.raises(ResponseImportError, match=r"response_text: row 3 \(\{'a': 1\}\)"):
        validate_rows(path, numbered, DISABILITIES, PROMPTS)


def test_jsonl_line_that_is_not_an_object_is_named(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_row()) + "\n[1, 2]\n")
    with pytest.raises(ResponseImportError, match="line 2 holds a list"):
        read_numbered(path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ResponseImportError, match="missing.csv does not exist"):
        read_numbered(tmp_path / "missing.csv")


# --------------------------------------------------------------------------- re-imports and units


def test_changed_texts_are_summarised_with_old_and_new():
    rows = _validate(_row(), _row(disability="hearing", response_text="new " * 40))
    landed = {rows[0]["generation_id"]: "A.", rows[1]["generation_id"]: "old"}
    changed = changed_texts(rows, landed)
    assert [r["_row"] for r, _ in changed] == [3]
    with pytest.raises(ResponseImportError) as err:
        refuse_changed("f.csv", changed)
    msg = str(err.value)
    assert "1 row(s) are already landed with a different response_text" in msg
    assert rows[1]["generation_id"][:12] in msg and "ableaudit:edu_001:hearing" in msg
    assert "landed 'old' -> file 'new new" in msg and "...'" in msg and "--replace" in msg


def test_identical_texts_are_not_changes():
    rows = _validate(_row(response_text=None))
    assert changed_texts(rows, {rows[0]["generation_id"]: None}) == []
    assert changed_texts(rows, {rows[0]["generation_id"]: ""}) == []


def test_rows_on_a_generated_unit_are_refused():
    rows = _validate(_row(), _row(disability="hearing", temperature="0.7"))
    generated = {("text", "m", "baseline", "ableaudit", "edu_001", "hearing", 0.7, 0)}
    with pytest.raises(ResponseImportError) as err:
        refuse_generated_units("f.csv", rows, generated)
    msg = str(err.value)
    assert "model_id: rows 3: an audit already generated" in msg and "'m-imported'" in msg
    refuse_generated_units(
        "f.csv", rows, {("text", "m", "baseline", "ableaudit", "edu_001", "hearing", None, 0)}
    )


def test_replace_supersedes_and_keeps_the_old_row(warehouse):
    rows = [
        {k: v for k, v in r.items() if k != "_row"}
        for r in _validate(_row(), _row(disability="vision"))
    ]
    report, replaced = land_imported_generations(warehouse, rows)
    assert (report.inserted, report.unchanged, replaced) == (2, 0, 0)
    fixed = [dict(rows[0], response_text="Fixed.", run_id="r2"), rows[1]]
    report, replaced = land_imported_generations(
        warehouse, fixed, supersede=[rows[0]["generation_id"]]
    )
    assert (report.inserted, report.unchanged, replaced) == (0, 1, 1)
    con = connect(warehouse)
    try:
        texts = con.execute(
            "select generation_id, response_text from raw.generations order by generation_id"
        ).fetchall()
        history = con.execute(
            "select generation_id, response_text, source, replaced_by_run_id "
            "from raw.generation_history"
        ).fetchall()
    finally:
        con.close()
    assert dict(texts) == {rows[0]["generation_id"]: "Fixed.", rows[1]["generation_id"]: "A."}
    assert history == [(rows[0]["generation_id"], "A.", "imported", "r2")]


# --------------------------------------------------------------------------- query set names


def test_builtin_query_sets_match_int_prompts():
    sql = querysets.INT_PROMPTS_SQL.read_text()
    assert set(re.findall(r"'([a-z_]+)' as query_set", sql)) == set(BUILTIN_QUERY_SETS)


@pytest.mark.parametrize("name", ["ableaudit", " AbleAudit ", "", None])
def test_a_builtin_or_empty_query_set_name_is_refused(name):
    with pytest.raises(QuerySetError, match="built in|non-empty"):
        check_query_set_name(name)


def test_landing_under_a_builtin_name_lands_nothing(warehouse):
    loaded = LoadedQuerySet(
        rows=[
            {
                "query_set": "x",
                "query_id": "q1",
                "domain": "education",
                "persona": None,
                "disability_id": None,
                "prompt_text": "Q?",
            }
        ]
    )
    with pytest.raises(QuerySetError, match="'ableaudit' is built in"):
        land_query_set(warehouse, loaded, query_set="ableaudit")
    con = connect(warehouse)
    try:
        assert con.execute("select count(*) from raw.external_queries").fetchone()[0] == 0
    finally:
        con.close()
    assert check_query_set_name(" mine ") == "mine"


def test_a_jsonl_column_is_found_in_any_row(tmp_path):
    path = tmp_path / "r.jsonl"
    first = {k: v for k, v in _row().items() if k != "response_text"}
    path.write_text(json.dumps(first) + "\n" + json.dumps(_row(sample_index=1)) + "\n")
    numbered = read_numbered(path)
    require_columns(path, [r for _, r in numbered], REQUIRED, "", ResponseImportError)
    rows = validate_rows(path, numbered, DISABILITIES, PROMPTS)
    assert [r["status"] for r in rows] == ["empty", "ok"]
    with pytest.raises(
        ResponseImportError,
        match=r"lacks required column\(s\) \['query_id', 'disability', 'response_text'\]",
    ):
        require_columns(path, [{"model_id": "m"}], REQUIRED, "", ResponseImportError)
