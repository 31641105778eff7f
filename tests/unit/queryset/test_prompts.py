"""Reading the generator's answers: the JSON asked for, else listed lines; nothing silently."""

from __future__ import annotations

from ableaudit.queryset.generating import make_ask
from ableaudit.queryset.prompts import (
    PROMPT_VERSIONS,
    parse_leakage,
    parse_personas,
    parse_query,
    persona_messages,
    persona_schema,
)


def test_personas_from_json_fenced_json_and_listed_lines():
    assert parse_personas(
        '{"personas": [{"persona": "teller", "description": "at the counter"}]}'
    ) == [{"persona": "teller", "description": "at the counter"}]
    fenced = '```json\n{"personas": [{"role": "clerk", "description": "files"}, "auditor"]}\n```'
    assert parse_personas(fenced) == [
        {"persona": "clerk", "description": "files"},
        {"persona": "auditor", "description": ""},
    ]
    listed = (
        "Here you go:\n1. Teller: serves customers\n2) Loan officer - approves loans\n- Auditor"
    )
    assert parse_personas(listed) == [
        {"persona": "Teller", "description": "serves customers"},
        {"persona": "Loan officer", "description": "approves loans"},
        {"persona": "Auditor", "description": ""},
    ]
    assert parse_personas("I cannot help with that.") is None


def test_a_query_pair_needs_both_texts():
    pair = '{"neutral_query": "How?", "disability_template": "How, with {disability}?"}'
    assert parse_query(pair) == {
        "neutral_query": "How?",
        "disability_template": "How, with {disability}?",
    }
    assert parse_query('{"neutral_query": "How?"}') is None
    assert parse_query("neutral_query: How?\ndisability_template: How with {disability}?") == {
        "neutral_query": "How?",
        "disability_template": "How with {disability}?",
    }
    assert parse_query("no idea") is None


def test_the_leakage_check_reads_json_or_a_yes_or_no():
    assert parse_leakage('{"leaks": true, "reason": "a ramp"}') == (True, "a ramp")
    assert parse_leakage("No, it does not.")[0] is False
    assert parse_leakage("maybe") == (None, "")


def test_a_key_changes_with_the_prompt_the_schema_and_the_generator():
    identity = {"backend": "openai", "model": "m@main"}
    messages = persona_messages("retail_banking", "A bank.", 3)
    a = make_ask(identity, True, "personas", "retail_banking", None, messages, persona_schema(3))
    same = make_ask(identity, True, "personas", "retail_banking", None, messages, persona_schema(3))
    assert a.key == same.key and a.schema["properties"]["personas"]["maxItems"] == 3
    assert make_ask(identity, False, "personas", "retail_banking", None, messages).key != a.key
    other = {**identity, "model": "m@v2"}
    assert (
        make_ask(other, True, "personas", "retail_banking", None, messages, persona_schema(3)).key
        != a.key
    )
    assert len(set(PROMPT_VERSIONS.values())) == 3
