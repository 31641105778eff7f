"""Every landing has an id, a failing build names it, and `ableaudit forget` undoes it.

The bad rows are written through the landing layer directly, as an import without
validation would have landed them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ableaudit.cli import main
from ableaudit.dbt.runner import DbtError, run_dbt
from ableaudit.warehouse import landing, reference_landing
from tests.fixtures.warehouse import imported_row, read

pytestmark = [pytest.mark.slow, pytest.mark.dbt_data_tests, pytest.mark.usefixtures("dbt_env")]


def _history(wh: Path, capsys) -> dict[str, dict]:
    assert main(["history", "--json", "--warehouse", str(wh)]) == 0
    return {h["landing_id"]: h for h in json.loads(capsys.readouterr().out)}


@pytest.mark.long
def test_a_build_failing_on_landed_rows_names_the_landing_and_forget_undoes_it(tmp_path, capsys):
    wh = tmp_path / "ableaudit.duckdb"
    good = imported_row("model-a", "baseline", "edu_001", "education", None, "ok", "Plan ahead.")
    bad = imported_row("model-a", "baseline", "edu_001", "education", "hearing", "ok", "Captions.")
    bad["task"] = "banana"
    source = tmp_path / "responses.csv"
    source.write_text("task,model_id\nbanana,model-a\n")
    landing.land_imported_generations(wh, [good])
    with landing.recording(wh, "import-responses", source, file=source) as bad_landing:
        landing.land_imported_generations(wh, [bad])
    assert bad_landing.rows == {"generations": 1}

    assert main(["build", "--warehouse", str(wh)]) == 2
    err = capsys.readouterr().err
    lid = bad_landing.landing_id
    assert "row_checks_stg_raw__generations" in err
    assert "broken: task in ('text', 'vision') (1 row)" in err
    assert f"landing {lid} (import-responses, {source.resolve()}" in err
    assert "1 row of stg_raw__generations, from:" in err
    assert f"`ableaudit forget {lid}`" in err

    history = _history(wh, capsys)
    assert history[lid]["source_sha256"] is not None
    assert history[lid]["status"] == "landed"

    assert main(["forget", lid, "--yes", "--warehouse", str(wh)]) == 0
    out = capsys.readouterr().out
    assert f"Forgot landing {lid}: removed 1 row of generations" in out
    assert "Built " in out  # the same build as `ableaudit build`, now passing
    assert read(
        wh, "select generation_id from main.stg_raw__generations"
    ).generation_id.tolist() == [good["generation_id"]]
    assert _history(wh, capsys)[lid]["status"] == "forgotten"

    assert main(["forget", lid, "--yes", "--warehouse", str(wh)]) == 2
    assert "already forgotten" in capsys.readouterr().err


def test_a_landed_query_set_under_the_builtin_name_is_traced_by_its_keys(tmp_path, capsys):
    """int_prompts carries no landing id: its duplicate prompts are followed to
    raw.external_queries by their key."""
    wh = tmp_path / "ableaudit.duckdb"
    rows = [
        {"query_id": "edu_001", "domain": "education", "prompt_text": "How do I study?"},
        {
            "query_id": "edu_001",
            "domain": "education",
            "disability_id": "hearing",
            "persona": "deaf",
            "prompt_text": "As a deaf student, how do I study?",
        },
    ]
    with landing.recording(wh, "import-queries", "aq.csv") as clash:
        reference_landing.replace_query_set(wh, "ableaudit", rows, "aq.csv")
    with pytest.raises(DbtError) as failed:
        run_dbt(["seed"], wh)
        run_dbt(["build", "--select", "+int_prompts"], wh)
    message = str(failed.value)
    assert "unique_int_prompts_prompt_id" in message
    assert f"landing {clash.landing_id} (import-queries, aq.csv" in message
    assert f"`ableaudit forget {clash.landing_id}`" in message

    assert (
        main(["forget", clash.landing_id[:6], "--yes", "--no-build", "--warehouse", str(wh)]) == 0
    )
    assert "removed 2 rows of external_queries" in capsys.readouterr().out
    run_dbt(["build", "--select", "+int_prompts"], wh)
