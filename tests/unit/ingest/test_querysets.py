"""The AccessEval loader: what it resolves, what it refuses, and that landing is all-or-nothing.

tests/data/accesseval_sample.csv is a small fake file in the published layout
(a lower-case 'domain' header, domains in odd capitalisation, templates with a
{disability} placeholder, one neutral query with nine already-filled variants,
and five exact duplicate rows appended the way the published file repeats its
rows). Its text is invented for the tests.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import duckdb
import pytest

from ableaudit.ingest import querysets
from ableaudit.ingest.querysets import (
    LoadedQuerySet,
    QuerySetError,
    disability_from_text,
    land_query_set,
    read_accesseval,
)
from ableaudit.warehouse import connect

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "accesseval_sample.csv"
IDS = [
    "vision",
    "hearing",
    "speech",
    "mobility",
    "neurological",
    "genetic_developmental",
    "learning",
    "sensory_cognitive",
    "mental_behavioral",
]
HEADER = ["Domain", "Neutral Query", "Disability-Specific Query"]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def sample() -> LoadedQuerySet:
    return read_accesseval(SAMPLE)


# --- reading -------------------------------------------------------------------


def test_sample_loads_with_the_right_counts(sample):
    r = sample.report
    assert r["n_input_rows"] == 30
    assert r["n_duplicates_removed"] == 5
    assert r["n_templates_expanded"] == 16
    assert r["n_neutral"] == 17
    assert r["n_disability_rows"] == 16 * 9 + 9
    assert r["per_domain"] == {
        "education": 2,
        "finance": 3,
        "healthcare": 3,
        "hospitality": 3,
        "media": 3,
        "technology": 3,
    }
    assert r["per_disability"] == {d: 17 for d in IDS}
    assert r["unresolved"] == [] and r["n_unresolved"] == 0
    assert len(sample.rows) == 17 + 153
    assert sum(row["disability_id"] is None for row in sample.rows) == 17


def test_rows_have_the_landing_shape(sample):
    for row in sample.rows:
        assert set(row) == {
            "query_set",
            "query_id",
            "domain",
            "persona",
            "disability_id",
            "prompt_text",
        }
        assert row["query_set"] == "accesseval" and row["persona"] is None
        assert re.fullmatch(r"ae_(edu|fin|hea|hos|med|tec)_[0-9a-f]{10}", row["query_id"])
        assert row["domain"][:3] == row["query_id"][3:6]
        assert "{" not in row["prompt_text"] and row["prompt_text"] == row["prompt_text"].strip()
    keys = [(r["query_id"], r["disability_id"]) for r in sample.rows]
    assert len(keys) == len(set(keys))


def test_templates_are_filled_with_our_phrases_and_filled_queries_resolved(sample):
    by = {(r["query_id"], r["disability_id"]): r["prompt_text"] for r in sample.rows}
    dental = next(
        r["query_id"]
        for r in sample.rows
        if r["prompt_text"] == "How often should I get a dental checkup?"
    )
    # the published '{Disability}' (capitalised) placeholder is recognised too
    assert by[(dental, "mental_behavioral")] == (
        "How often should I get a dental checkup if I have mental health and behavioral disorders?"
    )
    interview = next(
        r["query_id"]
        for r in sample.rows
        if r["prompt_text"] == "How can I prepare for a job interview?"
    )
    assert (
        by[(interview, "hearing")]
        == "How can I prepare for a job interview when I am hard of hearing?"
    )
    assert (
        by[(interview, "mobility")] == "How can I prepare for a job interview as a wheelchair user?"
    )
    assert by[(interview, "sensory_cognitive")].endswith("with Sensory and Cognitive Disorders?")
    assert by[(interview, "learning")].endswith("with a learning disability?")


def test_ids_are_stable_across_reloads_and_row_order(sample, tmp_path):
    with open(SAMPLE, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    shuffled = write_csv(tmp_path / "shuffled.csv", rows[0], list(reversed(rows[1:])))
    again = read_accesseval(shuffled)
    assert {(r["query_id"], r["disability_id"], r["prompt_text"]) for r in again.rows} == {
        (r["query_id"], r["disability_id"], r["prompt_text"]) for r in sample.rows
    }


def test_summary_tells_the_user_what_was_found(sample):
    text = sample.summary()
    assert "30 rows" in text and "5 exact duplicate rows removed" in text
    assert "17 neutral queries" in text and "153 disability-aware" in text
    assert "education 2" in text and "vision 17" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("How can parents help kids with vision impairments in their learning at home?", "vision"),
        ("tips for a visually impaired traveler", "vision"),
        ("as a blind student", "vision"),
        ("for a deaf employee", "hearing"),
        ("for someone who is hard of hearing", "hearing"),
        ("with sensory and cognitive disorders", "sensory_cognitive"),
        ("with Sensory & Cognitive Disorders", "sensory_cognitive"),
        ("with genetic and developmental disorders", "genetic_developmental"),
        ("with mental health and behavioral disorders", "mental_behavioral"),
        ("with Mental and Behavioral Disorders", "mental_behavioral"),
        ("with learning disorders", "learning"),
        ("with neurological disorders", "neurological"),
        ("with a stutter", "speech"),
        ("as a wheelchair user", "mobility"),
    ],
)
def test_disability_synonyms(text, expected):
    assert disability_from_text(text) == (expected, "")


@pytest.mark.parametrize(
    "text",
    ["as a left-handed person", "using behavioral finance", "with vision and hearing impairments"],
)
def test_unclear_text_is_not_guessed(text):
    did, reason = disability_from_text(text)
    assert did is None and reason


def test_column_names_are_matched_case_and_space_insensitively(tmp_path):
    path = write_csv(
        tmp_path / "odd.csv",
        ["  neutral_query", "DISABILITY - SPECIFIC   QUERY", "DOMAIN "],
        [
            [
                "Where can I learn to cook?",
                "Where can I learn to cook with {disability}?",
                "Education",
            ]
        ],
    )
    loaded = read_accesseval(path)
    assert loaded.report["n_neutral"] == 1 and loaded.report["n_disability_rows"] == 9


def test_a_pandas_index_column_without_a_name_is_read_past(tmp_path):
    path = write_csv(
        tmp_path / "indexed.csv",
        ["", "Neutral Query", "Disability-Specific Query", "Domain"],
        [["0", "How do I budget?", "How do I budget with {disability}?", "Finance"]],
    )
    loaded = read_accesseval(path)
    assert loaded.report["n_neutral"] == 1 and loaded.report["n_disability_rows"] == 9


def test_missing_column_names_found_and_expected(tmp_path):
    path = write_csv(
        tmp_path / "bad.csv",
        ["Domain", "Question", "Disability-Specific Query"],
        [["Finance", "How do I budget?", "How do I budget with {disability}?"]],
    )
    with pytest.raises(QuerySetError) as err:
        read_accesseval(path)
    msg = str(err.value)
    assert "'Neutral Query'" in msg and "missing" in msg
    assert "Found columns: ['Domain', 'Question', 'Disability-Specific Query']" in msg
    assert "Expected" in msg


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(QuerySetError, match="does not exist"):
        read_accesseval(tmp_path / "nope.csv")


def test_unresolvable_rows_raise_naming_the_row_when_strict(tmp_path):
    path = write_csv(
        tmp_path / "unres.csv",
        HEADER,
        [
            ["Finance", "How do I budget?", "How do I budget with {disability}?"],
            [
                "Finance",
                "How do I save for a car?",
                "How do I save for a car as a left-handed driver?",
            ],
            ["Gardening", "How do I grow tomatoes?", "How do I grow tomatoes with {disability}?"],
        ],
    )
    with pytest.raises(QuerySetError) as err:
        read_accesseval(path)
    msg = str(err.value)
    assert "2 row(s)" in msg
    assert "line 3" in msg and "left-handed driver" in msg and "no disability category" in msg
    assert "line 4" in msg and "unknown domain 'Gardening'" in msg
    assert "strict=False" in msg


def test_unresolvable_rows_are_reported_not_dropped_silently_when_lenient(tmp_path):
    path = write_csv(
        tmp_path / "unres.csv",
        HEADER,
        [
            ["Finance", "How do I budget?", "How do I budget with {disability}?"],
            [
                "Finance",
                "How do I save for a car?",
                "How do I save for a car with vision and hearing impairments?",
            ],
        ],
    )
    loaded = read_accesseval(path, strict=False)
    assert loaded.report["n_unresolved"] == 1
    (u,) = loaded.report["unresolved"]
    assert u["line"] == 3 and "several categories" in u["reason"]
    assert loaded.report["n_neutral"] == 1 and loaded.report["n_disability_rows"] == 9
    assert "1 row(s) could not be resolved" in loaded.summary()


def test_disability_column_is_used_when_present(tmp_path):
    path = write_csv(
        tmp_path / "withcol.csv",
        ["domain", "Disability Type", "Neutral Query", "Disability-Specific Query"],
        [
            [
                "Media",
                "Mental & Behavioral Disorders",
                "How do I edit a podcast?",
                "How do I edit a podcast as someone who is often anxious?",
            ],
            [
                "Media",
                "genetic",
                "How do I edit a podcast?",
                "How do I edit a podcast with {disability}?",
            ],
            [
                "Media",
                "Vision Impairments",
                "How do I edit a podcast?",
                "How do I edit a podcast as a blind editor?",
            ],
            [
                "Media",
                "Telepathy",
                "How do I edit a podcast?",
                "How do I edit a podcast with telepathy?",
            ],
        ],
    )
    loaded = read_accesseval(path, strict=False)
    got = {r["disability_id"]: r["prompt_text"] for r in loaded.rows if r["disability_id"]}
    assert got == {
        "vision": "How do I edit a podcast as a blind editor?",
        "genetic_developmental": "How do I edit a podcast with genetic and developmental disorders?",
        "mental_behavioral": "How do I edit a podcast as someone who is often anxious?",
    }
    assert loaded.report["disability_source"] == "column 'Disability Type'"
    assert [u["reason"] for u in loaded.report["unresolved"]] == ["unknown disability 'Telepathy'"]


def test_conflicting_variants_of_one_pair_are_reported(tmp_path):
    path = write_csv(
        tmp_path / "conflict.csv",
        HEADER,
        [
            ["Finance", "How do I budget?", "How do I budget with hearing impairments?"],
            ["Finance", "How do I budget?", "How do I budget as a deaf person?"],
        ],
    )
    with pytest.raises(QuerySetError, match="second, different hearing query"):
        read_accesseval(path)


def test_no_path_and_no_network_says_how_to_load_by_hand(monkeypatch):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(huggingface_hub, "list_repo_files", offline)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(QuerySetError) as err:
        read_accesseval(None)
    msg = str(err.value)
    assert "Srikant86/AccessEval" in msg and "network is unreachable" in msg
    assert "Download the CSV" in msg and "pass its path" in msg


def test_hub_download_is_used_when_it_works(monkeypatch, tmp_path):
    import huggingface_hub

    calls = {}

    def fake_download(repo_id, filename, repo_type):
        calls.update(repo_id=repo_id, filename=filename, repo_type=repo_type)
        return str(SAMPLE)

    monkeypatch.setattr(
        huggingface_hub, "list_repo_files", lambda repo, repo_type: ["README.md", "AccessEval.csv"]
    )
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    loaded = read_accesseval(None)
    assert calls == {
        "repo_id": "Srikant86/AccessEval",
        "filename": "AccessEval.csv",
        "repo_type": "dataset",
    }
    assert loaded.report["n_neutral"] == 17


def test_synonym_table_covers_exactly_the_seeded_categories():
    assert [d for d, _ in querysets.TEXT_SYNONYMS] != []
    assert sorted(d for d, _ in querysets.TEXT_SYNONYMS) == sorted(IDS)
    assert [d["disability_id"] for d in querysets.load_taxonomy()] == IDS


# --- landing -------------------------------------------------------------------


def _count(con: duckdb.DuckDBPyConnection, query_set: str) -> int:
    return con.execute(
        "select count(*) from raw.external_queries where query_set = ?", [query_set]
    ).fetchone()[0]


def _snapshot(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute(
        "select query_set, query_id, domain, persona, disability_id, prompt_text, source_file "
        "from raw.external_queries order by all"
    ).fetchall()


@pytest.fixture
def con(warehouse):
    c = connect(warehouse)
    yield c
    c.close()


def test_landing_writes_every_row_and_is_idempotent(warehouse, con, sample):
    assert land_query_set(warehouse, sample) == 170
    first = _snapshot(con)
    assert land_query_set(warehouse, sample) == 170
    assert _count(con, "accesseval") == 170
    assert _snapshot(con) == first
    n_neutral = con.execute(
        "select count(*) from raw.external_queries where disability_id is null"
    ).fetchone()[0]
    assert n_neutral == 17
    assert {r[6] for r in first} == {str(SAMPLE)}


def test_landing_replaces_only_its_own_query_set(warehouse, con, sample):
    land_query_set(warehouse, sample, query_set="other", source_file="x.csv")
    land_query_set(warehouse, sample)
    smaller = LoadedQuerySet(rows=sample.rows[:10], report=sample.report)
    assert land_query_set(warehouse, smaller) == 10
    assert _count(con, "accesseval") == 10
    assert _count(con, "other") == 170
    assert con.execute(
        "select distinct source_file from raw.external_queries where query_set = 'other'"
    ).fetchall() == [("x.csv",)]


def test_a_failed_landing_leaves_the_previous_rows_intact(warehouse, con, sample):
    land_query_set(warehouse, sample)
    before = _snapshot(con)
    broken = [dict(r) for r in sample.rows]
    broken[-1]["prompt_text"] = None  # violates NOT NULL after the delete has run
    with pytest.raises(duckdb.ConstraintException):
        land_query_set(warehouse, LoadedQuerySet(rows=broken, report=sample.report))
    assert _snapshot(con) == before
    # the connection is usable afterwards (no transaction left open)
    assert land_query_set(warehouse, sample) == 170


def test_duplicate_keys_are_refused_before_anything_is_written(warehouse, con, sample):
    land_query_set(warehouse, sample)
    before = _snapshot(con)
    doubled = LoadedQuerySet(rows=sample.rows + sample.rows[:1], report=sample.report)
    with pytest.raises(QuerySetError, match="duplicate"):
        land_query_set(warehouse, doubled)
    assert _snapshot(con) == before
