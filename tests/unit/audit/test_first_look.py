"""The first look's prompts: the first query of each domain, domains in order, every prompt of
those queries, and how many queries the whole audit has."""

from __future__ import annotations

from ableaudit.audit.flow import first_look_prompts


def _prompts() -> list[dict]:
    rows = []
    for domain, queries in (("media", ["m1", "m2"]), ("education", ["e1"]), ("finance", ["f1"])):
        for q in queries:
            rows += [{"domain": domain, "query_id": q, "condition": c} for c in ("neutral", "x")]
    return rows


def test_the_first_query_of_the_first_domains_with_all_their_prompts():
    look = {"queries": 2}
    chosen = first_look_prompts(_prompts(), look)
    assert {(r["domain"], r["query_id"]) for r in chosen} == {
        ("education", "e1"),
        ("finance", "f1"),
    }
    assert len(chosen) == 4 and all(r in _prompts() for r in chosen)
    assert look == {"queries": 2, "of": 4}


def test_more_queries_than_domains_takes_one_per_domain():
    look = {"queries": 9}
    chosen = first_look_prompts(_prompts(), look)
    assert sorted({r["query_id"] for r in chosen}) == ["e1", "f1", "m1"]
    assert look == {"queries": 3, "of": 4}
