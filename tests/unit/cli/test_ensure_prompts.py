"""An import builds the prompts it checks against only when they are missing or what they
are built from changed (the project's seeds and models, a query set landed since)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ableaudit.cli import imports
from ableaudit.dbt import prompts
from ableaudit.warehouse import connect


@pytest.fixture
def builds(monkeypatch) -> list[list[str]]:
    """The dbt commands run, standing in for dbt: a build makes the two relations."""
    ran: list[list[str]] = []

    def fake_dbt(args, warehouse):
        ran.append(list(args))
        if args[0] == "build":
            table = args[-1].lstrip("+")
            con = connect(warehouse)
            try:
                con.execute(
                    f"create or replace table main.{table} as "
                    "select query_set, query_id from raw.external_queries "
                    "union all select 'ableaudit', 'edu_001'"
                )
                con.execute(
                    "create or replace table main.stg_seeds__disabilities as "
                    "select 'hearing' as disability_id"
                )
            finally:
                con.close()

    monkeypatch.setattr("ableaudit.dbt.runner.run_dbt", fake_dbt)
    return ran


def _builds(ran: list[list[str]]) -> int:
    return sum(1 for a in ran if a[0] == "build")


def test_prompts_are_built_once_then_again_only_when_an_input_changed(tmp_path: Path, builds):
    wh = tmp_path / "ableaudit.duckdb"
    imports._ensure_prompts(wh)  # a fresh warehouse: built
    assert builds == [["build", "--select", "resource_type:seed", "+int_prompts"]]
    imports._ensure_prompts(wh)  # nothing changed: skipped
    assert _builds(builds) == 1
    con = connect(wh)
    con.execute(
        "insert into raw.external_queries (query_set, query_id, domain, prompt_text, landing_id) "
        "values ('mine', 'q1', 'education', 'Q?', 'x')"
    )
    con.close()
    imports._ensure_prompts(wh)  # a query set landed (`import queries`): built again
    assert _builds(builds) == 2
    imports._ensure_prompts(wh)
    assert _builds(builds) == 2
    con = connect(wh)
    con.execute("drop table main.int_prompts")
    con.close()
    imports._ensure_prompts(wh)  # the prompts are gone: built again
    assert _builds(builds) == 3


def test_a_changed_seed_or_another_warehouse_builds_again(tmp_path: Path, builds, monkeypatch):
    wh = tmp_path / "ableaudit.duckdb"
    imports._ensure_prompts(wh)
    project = tmp_path / "project"
    (project / "seeds").mkdir(parents=True)
    (project / "seeds" / "disabilities.csv").write_text("disability_id\nhearing\n")
    prompts.ensure_prompts(wh, project=project)  # another project's seeds: built again
    assert _builds(builds) == 2
    prompts.ensure_prompts(wh, project=project)
    assert _builds(builds) == 2
    (project / "seeds" / "disabilities.csv").write_text("disability_id\nhearing\nvision\n")
    prompts.ensure_prompts(wh, project=project)
    assert _builds(builds) == 3
    other = tmp_path / "other" / "ableaudit.duckdb"
    imports._ensure_prompts(other)  # no stamp beside it
    assert _builds(builds) == 4


def test_each_prompt_table_has_its_stamp_and_landed_images_build_the_vision_prompts(
    tmp_path: Path, builds
):
    """An audit's text and vision prompts: each built once, and again when images land."""
    wh = tmp_path / "ableaudit.duckdb"
    imports._ensure_prompts(wh)
    assert prompts.ensure_prompts(wh, "int_vision_prompts") is True
    assert builds[-1] == ["build", "--select", "resource_type:seed", "+int_vision_prompts"]
    assert prompts.ensure_prompts(wh, "int_vision_prompts") is False
    assert prompts.ensure_prompts(wh) is False  # the text prompts' stamp is kept
    con = connect(wh)
    con.execute(
        "insert into raw.images (image_set, image_id, rel_path, sha256, scenario, category, "
        "gender, race, loader, loaded_at) values ('mine', 'img-1', 'a.png', 'ab', 'office', "
        "'work', 'woman', 'asian', 'manifest', now())"
    )
    con.close()
    assert prompts.ensure_prompts(wh, "int_vision_prompts") is True
