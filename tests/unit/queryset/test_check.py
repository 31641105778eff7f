"""`ableaudit queryset check`: the build's query validation over sets made elsewhere."""

from __future__ import annotations

from ableaudit.cli.main import main
from ableaudit.queryset.check import check_query_set


def test_an_accesseval_layout_csv_reports_what_the_rules_would_remove(tmp_path, capsys):
    path = tmp_path / "set.csv"
    path.write_text(
        "Domain,Neutral Query,Disability-Specific Query\n"
        "Education,What accessibility services does my university offer?,"
        "What services does my university offer for students with {disability}?\n"
        "Finance,How do I pick a good savings account?,"
        "How do I pick a savings account as someone with {disability}?\n"
        "Finance,How can I choose a good savings account?,"
        "How can I choose a savings account with {disability}?\n"
        "Media,How do I start a podcast?,How do I start a podcast with {disability} and {disability}?\n"
        "Media,How do I grow a newsletter?,How do I grow a newsletter as a writer with hearing impairments?\n"
    )
    report = check_query_set(str(path))
    reasons = {it["neutral_query"]: it["reason"] for it in report.items}
    assert reasons == {
        "What accessibility services does my university offer?": "leakage",
        "How do I pick a good savings account?": None,
        "How can I choose a good savings account?": "near_duplicate",
        "How do I start a podcast?": "placeholder_multiple",
        "How do I grow a newsletter?": None,  # a filled query has no placeholder to check
    }
    out = tmp_path / "decisions.csv"
    assert main(["queryset", "check", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "5 neutral queries; the build's rules would remove 3" in printed
    assert out.read_text().count("\n") == 6


def test_the_built_in_set_passes_its_own_rules():
    report = check_query_set("ableaudit")
    assert len(report.items) == 234 and report.removed == []


def test_an_unknown_source_names_what_exists(tmp_path, capsys):
    assert main(["queryset", "check", "nosuchset", "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    assert (
        "neither the built-in set (ableaudit), a CSV file, nor a set landed"
        in capsys.readouterr().err
    )


def test_a_landed_set_is_checked_by_its_name(warehouse, capsys):
    from ableaudit import PROJECT_ROOT

    sample = PROJECT_ROOT / "tests" / "data" / "accesseval_sample.csv"
    assert main(["import", "queries", str(sample), "--warehouse", str(warehouse)]) == 0
    capsys.readouterr()
    report = check_query_set("accesseval", warehouse)
    assert len(report.items) == 17 and all(it["disability_template"] is None for it in report.items)
    assert main(["queryset", "check", "accesseval", "--warehouse", str(warehouse)]) == 0
    assert "accesseval: 17 neutral queries" in capsys.readouterr().out
