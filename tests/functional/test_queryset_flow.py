"""The `build-queryset` flow on the embedded default generator (SmolLM2-135M through
llama.cpp), end to end through the CLI: two new domains, a few personas, short answers,
then the query-set marts. A 135M model writes weak personas and queries; what is checked
is the machinery: every call landed with its provenance, every candidate decided, and a
funnel whose every stage adds up."""

from __future__ import annotations

import duckdb
import pytest
import yaml

from ableaudit.cli.main import main
from ableaudit.queryset.prompts import PROMPT_VERSION


@pytest.mark.slow
def test_the_flow_builds_a_set_for_two_new_domains_on_the_embedded_model(warehouse, tmp_path):
    cfg = {
        "name": "embedded",
        "personas_per_domain": 2,
        "domains": [
            {
                "id": "retail_banking",
                "description": "A retail bank's assistant answers customers about accounts, "
                "cards, loans and payments.",
                "seed_personas": ["small business owner"],
            },
            {
                "id": "university_help_desk",
                "description": "A university help desk answers students and staff about "
                "enrolment, courses, fees and campus services.",
            },
        ],
        "generator": {
            "backend": "llamacpp",
            "model": "builtin:smollm2",
            "decoding": {"temperature": 0.7, "max_new_tokens": 96, "seed": 0},
            "options": {"n_threads": 1, "n_ctx": 1024},
        },
    }
    path = tmp_path / "queryset.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["queryset", "build", "--config", str(path), "--warehouse", str(warehouse)]) == 0

    con = duckdb.connect(str(warehouse), read_only=True)
    calls = con.execute(
        "select stage, backend, generator_model, structured, status, count(*) "
        "from raw.queryset_generations group by all order by all"
    ).fetchall()
    build = con.execute(
        "select query_set, status, generator_revision, prompt_version from raw.queryset_builds"
    ).fetchall()
    undecided = con.execute(
        "select count(*) from raw.queryset_candidates where decision not in ('kept', 'removed')"
    ).fetchone()
    personas = con.execute(
        "select domain, count(*) from raw.queryset_candidates where stage = 'personas' "
        "and decision = 'kept' group by all"
    ).fetchall()
    queries = con.execute(
        "select count(*) from raw.queryset_generations where stage = 'queries'"
    ).fetchone()
    funnel = con.execute(
        "select funnel_stage, domain, outcome, sum(n) from main.queryset_funnel "
        "where query_set = 'embedded@1' group by all"
    ).fetchall()
    con.close()

    # one persona call per domain, one query call per kept persona, constrained by llama.cpp
    persona_calls = [c for c in calls if c[0] == "personas"]
    assert sum(c[-1] for c in persona_calls) == 2
    assert {c[1:4] for c in calls} == {("llamacpp", "builtin:smollm2", True)}
    assert queries == (sum(n for _, n in personas),)
    assert build[0][:2] == ("embedded@1", "validated")
    assert build[0][2].startswith("builtin:smollm2@") and build[0][3] == PROMPT_VERSION
    assert undecided == (0,)
    # the funnel adds up: what came into a stage is what it removed plus what it kept
    totals: dict[tuple[str, str], dict[str, int]] = {}
    for stage, domain, outcome, n in funnel:
        totals.setdefault((stage, domain), {})[outcome] = int(n)
    assert ("personas", "retail_banking") in totals
    assert ("personas", "university_help_desk") in totals
    for key, t in totals.items():
        assert t.get("generated", 0) == t.get("removed", 0) + t.get("kept", 0) + t.get(
            "pending", 0
        ), key
