"""An audit refuses to answer units whose responses were imported: both answers would count."""

from __future__ import annotations

import pytest

from ableaudit.audit.planning import imported_units, plan_task, refuse_imported_units
from ableaudit.config import ConfigError, parse_config
from ableaudit.warehouse import connect
from tests.fixtures.warehouse import imported_row, land

PROMPTS = [
    {
        "prompt_id": f"ableaudit:{q}:{d or 'neutral'}",
        "query_set": "ableaudit",
        "query_id": q,
        "domain": domain,
        "disability_id": d,
        "condition": "neutral" if d is None else "disability",
        "prompt_text": f"prompt {q} {d}",
    }
    for q, domain in (("edu_001", "education"), ("fin_001", "finance"))
    for d in (None, "hearing")
]


def _plans(**target):
    cfg = parse_config(
        {
            "targets": [{"name": "one", "backend": "openai", "model": "served", **target}],
            "temperatures": [0.1],
        }
    )
    return plan_task(cfg, "text", PROMPTS)


def _unit(query_id, disability, *, model="served-a", arm="baseline", temperature=0.1, sample=0):
    return ("text", model, arm, "ableaudit", query_id, disability, temperature, sample)


def test_imported_units_of_the_target_refuse_the_audit_with_counts_and_fix():
    plans = _plans(model_id="served-a")
    imported = {
        _unit("edu_001", None): "3f2a9c01d4e5 (answers.csv)",
        _unit("edu_001", "hearing"): "3f2a9c01d4e5 (answers.csv)",
        _unit("fin_001", "hearing"): None,
    }
    with pytest.raises(ConfigError) as err:
        refuse_imported_units(plans, imported)
    message = str(err.value)
    assert "target 'one' (task text, model_id 'served-a'): 3 of its 4 planned units" in message
    assert "landed by 3f2a9c01d4e5 (answers.csv)" in message
    assert "ableaudit:edu_001 neutral, arm baseline, temperature 0.1, sample 0" in message
    assert "the audit stopped before sending a request of this task" in message
    assert "`model_id: served-a-audited`" in message
    assert "`ableaudit forget LANDING_ID` removes one" in message


def test_an_unrecorded_import_is_said_so():
    with pytest.raises(
        ConfigError, match="imported before landings were recorded, so their file is not known"
    ):
        refuse_imported_units(_plans(model_id="served-a"), {_unit("fin_001", None): None})


@pytest.mark.parametrize(
    "unit",
    [
        _unit("edu_001", None, model="served-b"),  # another model_id
        _unit("edu_001", None, arm="mitigated"),  # an arm the config does not run
        _unit("edu_001", None, temperature=0.7),  # another temperature
        _unit("edu_001", None, sample=1),  # a sample the config does not draw
        _unit("edu_001", "vision"),  # a disability the audit does not ask
    ],
)
def test_other_units_pass(unit):
    refuse_imported_units(_plans(model_id="served-a"), {unit: "import-7"})


def test_an_import_without_a_temperature_meets_the_unit_at_any_temperature():
    with pytest.raises(ConfigError, match="1 of its 4 planned units are already imported"):
        refuse_imported_units(
            _plans(model_id="served-a"), {_unit("edu_001", None, temperature=None): "import-7"}
        )


def test_imported_units_reads_only_imported_rows_of_the_planned_models(tmp_path):
    wh = tmp_path / "wh.duckdb"
    connect(wh).close()  # the raw layer
    row = imported_row("served-a", "baseline", "edu_001", "education", None, "ok", "A.")
    land(
        wh,
        [
            row,
            {**row, "generation_id": "g2", "disability_id": "hearing", "source": "generated"},
            {**row, "generation_id": "g3", "model_id": "served-b", "target": "served-b"},
            {**row, "generation_id": "g4", "task": "vision"},
        ],
    )
    assert imported_units(wh, _plans(model_id="served-a")) == {
        _unit("edu_001", None): "run run-served-a"
    }
    # the target's name stands for its model_id when it gives none
    assert imported_units(wh, _plans()) == {}
