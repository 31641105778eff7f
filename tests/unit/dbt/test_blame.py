"""A failing dbt test's rows are followed to the landings that wrote them (no dbt run here:
the failing results and the manifest are built by hand, the model is a plain view)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import duckdb
import pytest

from ableaudit.dbt.blame import blame, culprits
from ableaudit.warehouse import landing
from tests.fixtures.warehouse import imported_row


def _test_result(name, model, column=None, meta=None, compiled="select 1 where false"):
    node = SimpleNamespace(
        name=name,
        resource_type="test",
        attached_node=f"model.ableaudit.{model}" if model else None,
        column_name=column,
        test_metadata=SimpleNamespace(name=meta[0], kwargs=meta[1], namespace=None)
        if meta
        else None,
        compiled_code=compiled,
        depends_on=SimpleNamespace(nodes=[f"model.ableaudit.{model}"] if model else []),
    )
    return SimpleNamespace(status="fail", node=node)


@pytest.fixture
def landed(warehouse, tmp_path, monkeypatch):
    """Two imports, the second with a bad task; a view standing in for the staging model."""
    with landing.recording(warehouse, "import-responses", "good.csv") as good:
        landing.land_imported_generations(
            warehouse, [imported_row("m", "baseline", "q1", "d", None, "ok", "a")]
        )
    bad = imported_row("m", "baseline", "q1", "d", "hearing", "ok", "b")
    with landing.recording(warehouse, "import-responses", "bad.csv") as wrong:
        landing.land_imported_generations(warehouse, [dict(bad, task="banana")])
    con = duckdb.connect(str(warehouse))
    con.execute("create view main.stg_g as select * from raw.generations")
    con.execute("create view main.int_g as select generation_id, task from raw.generations")
    con.close()
    target = tmp_path / "target"
    target.mkdir()
    nodes = {
        f"model.ableaudit.{m}": {"name": m, "relation_name": f'"ableaudit"."main"."{m}"'}
        for m in ("stg_g", "int_g")
    }
    (target / "manifest.json").write_text(json.dumps({"nodes": nodes}))
    monkeypatch.setenv("DBT_TARGET_PATH", str(target))
    return good.landing_id, wrong.landing_id


def test_a_generic_test_names_the_landing_of_its_rows(warehouse, landed, tmp_path):
    _, wrong = landed
    values = ("accepted_values", {"values": ["text", "vision"], "column_name": "task"})
    (found,) = culprits([_test_result("av_task", "stg_g", "task", values)], warehouse, tmp_path)
    assert (found.model, found.offending) == ("stg_g", 1)
    assert [(lt["landing_id"], lt["source"], n) for lt, n in found.landings] == [
        (wrong, "bad.csv", 1)
    ]


def test_a_model_without_landing_ids_is_followed_by_its_key(warehouse, landed, tmp_path):
    good, wrong = landed
    sql = "select generation_id from main.int_g"  # a singular test failing on every row
    (found,) = culprits([_test_result("every_row", None, compiled=sql)], warehouse, tmp_path)
    assert found.offending == 2
    assert sorted(lt["landing_id"] for lt, _ in found.landings) == sorted([good, wrong])
    lines = blame([_test_result("every_row", None, compiled=sql)], warehouse, tmp_path)
    assert lines[0] == "Landed data fails these tests:"
    assert lines[-1].startswith("Fix: ") and f"`ableaudit forget {wrong}`" in lines[-1]


def test_rows_from_no_landing_add_nothing(warehouse, landed, tmp_path):
    not_null = ("not_null", {"column_name": "task"})
    assert blame([_test_result("nn_task", "stg_g", "task", not_null)], warehouse, tmp_path) == []


def test_a_row_checks_test_names_the_rules_its_rows_break(warehouse, landed, tmp_path):
    _, wrong = landed
    sql = (
        "select *, concat_ws('; ', case when task not in ('text', 'vision') "
        "then 'task in (''text'', ''vision'')' end) as failed_checks "
        "from main.stg_g where task not in ('text', 'vision')"
    )
    (found,) = culprits(
        [_test_result("row_checks_stg_g", "stg_g", compiled=sql)], warehouse, tmp_path
    )
    assert found.broken == [("task in ('text', 'vision')", 1)]
    lines = blame([_test_result("row_checks_stg_g", "stg_g", compiled=sql)], warehouse, tmp_path)
    assert "      broken: task in ('text', 'vision') (1 row)" in lines


def test_rules_broken_by_rows_from_no_landing_are_named(warehouse, landed, tmp_path):
    sql = "select task, 'length(task) > 5' as failed_checks from main.int_g"  # no key, no landing
    lines = blame([_test_result("row_checks_int_g", "int_g", compiled=sql)], warehouse, tmp_path)
    assert lines == [
        "Rules the failing rows break:",
        "  - row_checks_int_g: 2 rows of int_g",
        "      broken: length(task) > 5 (2 rows)",
    ]
