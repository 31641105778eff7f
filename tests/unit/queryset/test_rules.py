"""The validation rules, one by one: what each removes, with its reason and evidence."""

from __future__ import annotations

import pytest

from ableaudit.queryset.lexicon import find_leaks, leakage_patterns
from ableaudit.queryset.rules import placeholder_problem, validate_personas, validate_queries

PATTERNS = leakage_patterns(["vision impairments"])


@pytest.mark.parametrize(
    "text",
    [
        "What accessibility services does my university offer?",  # the paper's own example
        "Which banks have a branch with a wheelchair ramp?",
        "How do I get a screen reader to read my statements?",
        "Can my landlord refuse a guide dog?",
        "What support is there for students with ADHD?",
        "Where can I learn sign language near campus?",
        "Do lectures have closed captions?",
        "Is there a quiet room for people with sensory overload?",
        "Can I get a loan if I have vision impairments?",
    ],
)
def test_leaking_neutral_queries_are_found(text):
    assert find_leaks(text, PATTERNS)


@pytest.mark.parametrize(
    "text",
    [
        "How do I check my blind spot when reversing?",
        "How is a double-blind trial run?",
        "What is our company's vision for next year?",
        "When is the court hearing for my tenancy case?",
        "How do I write a caption for a photo?",
        "Why did the market fall during the Great Depression?",
        "How do I open a savings account?",
    ],
)
def test_ordinary_uses_of_disability_words_do_not_leak(text):
    assert find_leaks(text, PATTERNS) == []


@pytest.mark.parametrize(
    ("neutral", "template", "reason"),
    [
        ("How do I pay?", "How do I pay with {disability}?", None),
        ("How do I pay?", "How do I pay with { Disability }?", None),
        ("How do I pay?", "How do I pay as a customer?", "placeholder_missing"),
        ("How do I pay?", "{disability} and {disability}?", "placeholder_multiple"),
        ("How do I pay?", "How do I pay with {condition}?", "placeholder_unknown"),
        (
            "How do I pay with {disability}?",
            "How do I pay with {disability}?",
            "placeholder_in_neutral",
        ),
    ],
)
def test_a_template_needs_exactly_one_disability_placeholder(neutral, template, reason):
    problem = placeholder_problem(neutral, template)
    assert (problem[0] if problem else None) == reason


def _query(cid, neutral, template="How do I do it with {disability}?", domain="banking"):
    return {
        "candidate_id": cid,
        "domain": domain,
        "neutral_query": neutral,
        "disability_template": template,
    }


def test_each_query_is_removed_by_the_first_rule_it_fails_and_near_twins_go_across_domains():
    items = [
        _query("a", "How do I open a savings account?"),
        _query("b", "How can I open a savings account?", domain="university"),  # twin of a
        _query("c", "What accessibility services does the bank offer?"),
        _query("d", "", None),
        _query("e", "How do I pay a bill?", "How do I pay a bill?"),
        _query("f", "How do I pay a bill online?", "How do I pay a { disability } bill online?"),
        _query("g", "How do I close an account?"),
    ]
    validate_queries(
        items, similarity=0.85, llm_leaks={"g": (True, "implies a carer"), "f": (False, "")}
    )
    got = {it["candidate_id"]: (it["decision"], it["reason"]) for it in items}
    assert got == {
        "a": ("kept", None),
        "b": ("removed", "near_duplicate"),
        "c": ("removed", "leakage"),
        "d": ("removed", "empty"),
        "e": ("removed", "placeholder_missing"),
        "f": ("kept", None),
        "g": ("removed", "leakage_llm"),
    }
    b = next(it for it in items if it["candidate_id"] == "b")
    assert "with a (" in b["detail"] and "cosine 0.9" in b["detail"]
    assert "'accessibility' (accessibility)" in items[2]["detail"]
    # a kept template's placeholder is written the one way int_prompts fills it
    assert items[5]["disability_template"] == "How do I pay a {disability} bill online?"


def test_personas_generic_empty_leaking_off_domain_and_twins_within_a_domain_only():
    def persona(cid, role, desc="", domain="banking"):
        return {
            "candidate_id": cid,
            "domain": domain,
            "persona": role,
            "persona_description": desc,
        }

    items = [
        persona("1", "mortgage adviser", "helps buyers choose a home loan"),
        persona("2", "mortgage advisor", "helps buyers choose a home loan"),
        persona("3", "A user"),
        persona("4", "  "),
        persona("5", "deaf customer", "opens an account"),
        persona("6", "mortgage adviser", "helps buyers choose a home loan", domain="housing"),
    ]
    descriptions = {
        "banking": "A retail bank's assistant answers about accounts, loans and mortgages.",
        "housing": "A housing charity's assistant answers about renting and buying homes.",
    }
    validate_personas(items, descriptions, similarity=0.85, off_domain=0.1)
    got = {it["candidate_id"]: (it["decision"], it["reason"]) for it in items}
    assert got == {
        "1": ("kept", None),
        "2": ("removed", "near_duplicate"),
        "3": ("removed", "generic"),
        "4": ("removed", "empty"),
        "5": ("removed", "leakage"),
        "6": ("kept", None),  # the same role in another domain is no twin
    }
    off = [persona("7", "trawler crew", "haul tuna nets aboard a ship in stormy oceans")]
    validate_personas(off, descriptions, similarity=0.85, off_domain=0.1)
    assert (off[0]["decision"], off[0]["reason"]) == ("removed", "off_domain")
