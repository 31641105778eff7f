"""`ableaudit build` skips a build when nothing it reads changed since the last one.

One real build, then most other builds in this module replace dbt with a counter
(publish and the report still run): what is tested is the decision, on each input
the stamp covers, and that a skipped build leaves every file as it was. The stamp
lives in the warehouse (dbt_state.build_stamp): the builds that follow what users do
to the file (delete it, restore an older one, run dbt by hand, move it) are real.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml

from ableaudit import PROJECT_ROOT
from ableaudit.cli import main
from ableaudit.dbt import build_stamp, runner
from ableaudit.warehouse import connect
from tests.fixtures.from_scratch import assert_as_from_scratch
from tests.fixtures.warehouse import (
    generation_id,
    land,
    read,
    response,
    synthetic_generations,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    wh = tmp_path_factory.mktemp("skip") / "ableaudit.duckdb"
    connect(wh).close()  # the raw layer
    land(wh, synthetic_generations())
    assert main(["build", "--warehouse", str(wh)]) == 0
    return wh


@pytest.fixture
def dbt_calls(monkeypatch):
    calls = []

    def build(
        wh,
        vars=None,
        all_tests=False,
        project_checked=False,
        changed_raw_tables=None,
        ungated=False,
    ):
        calls.append(
            {
                "vars": vars,
                "all_tests": all_tests,
                "project_checked": project_checked,
                "changed_raw_tables": changed_raw_tables,
                "ungated": ungated,
            }
        )

    monkeypatch.setattr(runner, "build", build)
    return calls


def _build(wh, capsys, *extra) -> str:
    """What `ableaudit build` says, after dbt's log (a real build prints one)."""
    capsys.readouterr()
    assert main(["build", "--warehouse", str(wh), *extra]) == 0
    out = capsys.readouterr().out
    said = [i for i, line in enumerate(out.splitlines()) if line.startswith(("Built", "Nothing"))]
    return "\n".join(out.splitlines()[said[0] :]) if said else out


def _stamp(wh: Path) -> dict | None:
    """The stamp the warehouse holds, valid or not."""
    with duckdb.connect(str(wh), read_only=True) as con:
        if not build_stamp.exists(con, build_stamp.STAMP):
            return None
        (row,) = con.execute(f"select stamp from {build_stamp.STAMP}").fetchall()
    return json.loads(row[0])


def _copy(built: Path, folder: Path) -> Path:
    """The built warehouse's folder (warehouse, published copy, report) copied to ``folder``,
    modification times kept: a copy of what the build left."""
    shutil.copytree(built.parent, folder)
    return folder / built.name


def test_a_build_with_nothing_new_is_skipped_and_leaves_every_file(built, capsys):
    stamp = _stamp(built)
    published = build_stamp.kept_path(built, stamp["published"])
    report = build_stamp.kept_path(built, stamp["report"])
    assert published.is_file() and report.is_file()
    before = {p: p.read_bytes() for p in (built, published, report)}
    out = _build(built, capsys)
    assert out.startswith("Nothing changed since the build of"), out
    assert str(published) in out and str(report) in out and "--force" in out
    assert {p: p.read_bytes() for p in (built, published, report)} == before


def test_the_stamp_is_inside_the_warehouse_and_names_no_absolute_path(built):
    stamp = _stamp(built)
    assert stamp is not None
    text = json.dumps(stamp)
    assert str(built.parent) not in text and not os.path.isabs(stamp["published"][0])
    assert not built.with_name(built.name + ".build.json").exists()  # no file beside it
    # it names the dbt invocation that built the warehouse, the last one recorded in it
    with duckdb.connect(str(built), read_only=True) as con:
        (invocation,) = con.execute(f"select invocation_id from {build_stamp.STAMP}").fetchone()
        assert invocation == build_stamp.last_invocation(con)
        commands = con.execute(
            f"select command, finished_at is not null from {build_stamp.INVOCATIONS} order by seq"
        ).fetchall()
    assert commands[-1] == ("build", True)
    # and it is never published
    published = build_stamp.kept_path(built, stamp["published"])
    with duckdb.connect(str(published), read_only=True) as con:
        schemas = {s for (s,) in con.execute("select schema_name from duckdb_schemas()").fetchall()}
    assert "dbt_state" not in schemas


@pytest.mark.parametrize(
    "change",
    [
        "landing",
        "raw edit",
        "vars",
        "all tests",
        "force",
        "published copy gone",
        "view dropped",
        "dbt by hand",
    ],
)
def test_anything_the_build_reads_or_left_that_changed_builds(
    built, tmp_path, capsys, dbt_calls, change
):
    work = _copy(built, tmp_path / "work")
    published = build_stamp.kept_path(work, _stamp(work)["published"])
    assert _build(work, capsys).startswith("Nothing changed")  # the copy is as built
    assert dbt_calls == []

    extra = []
    con = duckdb.connect(str(work))
    if change == "landing":
        row = synthetic_generations(seed=1)[0]
        land(work, [dict(row, model_id="model-c", generation_id="gen-new")])
    elif change == "raw edit":  # outside the landing layer: counted all the same
        con.execute(
            "update raw.generations set response_text = response_text || '!' "
            "where response_text is not null and rowid = (select min(rowid) from raw.generations "
            "where response_text is not null)"
        )
    elif change == "vars":
        extra = ["--vars", "{degradation_threshold: 0.1}"]
    elif change == "all tests":
        extra = ["--all-tests"]
    elif change == "force":
        extra = ["--force"]
    elif change == "published copy gone":
        published.unlink()
    elif change == "view dropped":
        con.execute("drop view main.stg_raw__external_queries")
    con.close()
    if change == "dbt by hand":  # a seed reloaded: same relations, same counts, another writer
        runner.run_dbt(["seed", "--select", "metrics"], work)
    out = _build(work, capsys, *extra)
    assert out.startswith("Built"), out
    assert len(dbt_calls) == 1
    # the unit tests and the data tests of seeds run again, and every seed and view is built,
    # when the project, libraries or settings changed, on --force, and after a dbt command
    # that was not the build that wrote the stamp
    assert dbt_calls[0]["project_checked"] is (change not in ("vars", "force", "dbt by hand"))
    assert dbt_calls[0]["all_tests"] is (change == "all tests")
    # the raw tables that changed since the last build, which decide what else it leaves out
    changed = {"landing": {"generations"}, "raw edit": {"generations"}}
    if dbt_calls[0]["project_checked"]:
        assert dbt_calls[0]["changed_raw_tables"] == changed.get(change, set()), change
    else:
        assert dbt_calls[0]["changed_raw_tables"] is None
    # the stamp now records this build: the next one is skipped
    again = [] if change == "force" else extra
    assert _build(work, capsys, *again).startswith("Nothing changed")
    assert len(dbt_calls) == 1


def test_a_failed_build_leaves_no_stamp(built, tmp_path, capsys, monkeypatch):
    work = _copy(built, tmp_path / "work")
    assert _stamp(work) is not None

    def fails(*args, **kwargs):
        raise RuntimeError("a data test failed")

    monkeypatch.setattr(runner, "build", fails)
    assert main(["build", "--warehouse", str(work), "--force"]) != 0
    assert "a data test failed" in capsys.readouterr().err
    assert _stamp(work) is None


def test_the_settings_digest_follows_a_folder_the_projects_own_vars_name(tmp_path):
    """A local similarity_model folder set in dbt_project.yml, edited in place: the next build
    is not skipped (the cosine's version, and so its cache, follow the same files)."""
    model = tmp_path / "minilm"
    model.mkdir()
    (model / "config.json").write_text("{}")
    project = tmp_path / "project"
    project.mkdir()
    (project / "dbt_project.yml").write_text(
        yaml.safe_dump({"name": "p", "vars": {"similarity_model": str(model)}})
    )
    env = {"HOME": "/x"}
    first = build_stamp.settings_digest(None, env, project)
    assert first == build_stamp.settings_digest(None, env, project)
    (model / "weights.bin").write_bytes(b"\0" * 10)
    second = build_stamp.settings_digest(None, env, project)
    assert second != first
    (model / "weights.bin").write_bytes(b"\0" * 11)
    assert build_stamp.settings_digest(None, env, project) != second
    # --vars names another value: the project's default is not read
    other = f"{{similarity_model: {tmp_path / 'none'}}}"
    before = build_stamp.settings_digest(other, env, project)
    (model / "weights.bin").write_bytes(b"\0" * 12)
    assert build_stamp.settings_digest(other, env, project) == before


def test_the_settings_digest_follows_environment_vars_files_and_the_classifier(tmp_path):
    gates = tmp_path / "gates.yml"
    gates.write_text("rules: []\n")
    env = {"ABLEAUDIT_REGARD_MODEL": str(tmp_path / "none"), "HOME": "/x"}
    first = build_stamp.settings_digest(f"{{gates_file: {gates}}}", env)
    assert first == build_stamp.settings_digest(f"{{gates_file: {gates}}}", dict(env, HOME="/y"))
    assert first == build_stamp.settings_digest(
        f"{{gates_file: {gates}}}", dict(env, ABLEAUDIT_API_KEY="secret")
    )
    # DuckDB's memory limit and dbt's log levels (`-v`) change how a build runs, not what it computes
    for how in ({"ABLEAUDIT_DUCKDB_MEMORY_LIMIT": "2GB"}, {"DBT_LOG_LEVEL": "warn"}):
        assert first == build_stamp.settings_digest(f"{{gates_file: {gates}}}", dict(env, **how))
    assert first != build_stamp.settings_digest(
        f"{{gates_file: {gates}}}", dict(env, ABLEAUDIT_SCORE_WORKERS="2")
    )
    gates.write_text("rules: [{metric: vader}]\n")
    assert first != build_stamp.settings_digest(f"{{gates_file: {gates}}}", env)
    # a Regard classifier installed where the settings point: the next build scores with it
    model = tmp_path / "regard"
    env["ABLEAUDIT_REGARD_MODEL"] = str(model)
    absent = build_stamp.settings_digest(None, env)
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert build_stamp.settings_digest(None, env) != absent


def test_the_raw_digest_is_what_a_build_leaves_it(built):
    """dbt writes nothing into the raw schema: the digest read before a build is the one the
    next build reads."""
    assert read(built, "select count(*) as n from raw.generations").n[0] > 0
    stamp = _stamp(built)
    assert stamp["inputs"]["raw"] == build_stamp.raw_digest(built)
    assert stamp["inputs"]["raw_tables"] == build_stamp.raw_table_digests(built)
    assert set(stamp["inputs"]["raw_tables"]) >= runner.ANSWER_TABLES


def _selected(wh, selector: str) -> set[str]:
    from dbt.cli.main import dbtRunner

    argv = ["ls", "--selector", selector, "--resource-type", "all", "--output", "json"]
    argv += ["--output-keys", "unique_id", "--quiet"]
    argv += ["--project-dir", str(PROJECT_ROOT), "--profiles-dir", str(PROJECT_ROOT)]
    with runner._env(ABLEAUDIT_WAREHOUSE=str(wh), ABLEAUDIT_PROJECT_DIR=str(PROJECT_ROOT)):
        res = dbtRunner().invoke(argv)
    assert res.success, res.exception
    return {json.loads(line)["unique_id"] for line in res.result}


def test_the_project_only_checks_are_the_unit_tests_and_the_tests_that_read_no_landed_row(
    built, monkeypatch
):
    monkeypatch.delenv("DBT_EXCLUDE_RESOURCE_TYPES", raising=False)  # the suite's: every test
    project_only = _selected(built, "project_only_checks")
    default = _selected(built, "default_build")
    landed = _selected(built, runner.LANDED_ROWS_SELECTOR)
    # independently, from dbt's manifest: a test reads landed rows when a raw source is
    # among its ancestors
    manifest = json.loads((Path(os.environ["DBT_TARGET_PATH"]) / "manifest.json").read_text())
    nodes = {**manifest["nodes"], **manifest["unit_tests"]}

    seen: dict[str, bool] = {}

    def reads_landed_rows(uid: str) -> bool:
        if uid.startswith("source."):
            return True
        if uid not in seen:
            parents = nodes.get(uid, {}).get("depends_on", {}).get("nodes", [])
            seen[uid] = any(reads_landed_rows(p) for p in parents)
        return seen[uid]

    expected = set(manifest["unit_tests"]) | {
        u
        for u, n in manifest["nodes"].items()
        if n["resource_type"] == "test" and not reads_landed_rows(u)
    }
    assert project_only == expected
    assert any(u.startswith("unit_test.") for u in project_only)
    assert any(u.startswith("test.") and "stg_seeds__" in u for u in project_only)
    # a build on the last build's project also leaves out what it would build the same: the
    # seeds, the views, and the models that read no landed row
    fixed = {
        u
        for u, n in manifest["nodes"].items()
        if n["resource_type"] == "seed"
        or (
            n["resource_type"] == "model"
            and (n["config"]["materialized"] == "view" or not reads_landed_rows(u))
        )
    }
    assert any(u.startswith("seed.") for u in fixed) and any("stg_raw__" in u for u in fixed)
    assert landed == default - project_only - fixed
    assert any(u.startswith("test.") and "stg_raw__generations" in u for u in landed)
    # every table that holds landed rows is built
    assert {u for u in default if u.startswith(("model.", "seed."))} - fixed <= landed
    assert "model.ableaudit.pair_details" in landed and "model.ableaudit.degradation" in landed

    # when only the tables a landing of answers writes changed: what of that reads any of them
    answers = _selected(built, runner.ANSWERS_LANDED_SELECTOR)
    answer_sources = {f"source.ableaudit.raw.{t}" for t in runner.ANSWER_TABLES}
    assert answer_sources <= set(manifest["sources"])
    reads: dict[str, set[str]] = {}

    def sources_read(uid: str) -> set[str]:
        if uid.startswith("source."):
            return {uid}
        if uid not in reads:
            parents = nodes.get(uid, {}).get("depends_on", {}).get("nodes", [])
            reads[uid] = set().union(*(sources_read(p) for p in parents))
        return reads[uid]

    assert answers == {u for u in landed if sources_read(u) & answer_sources}
    left_out = landed - answers
    assert any(u.startswith("test.") and "stg_raw__judgments" in u for u in left_out)
    assert "model.ableaudit.pair_details" in answers and "model.ableaudit.degradation" in answers


def test_a_models_row_checks_fail_on_each_broken_rule_and_name_it(built, tmp_path, monkeypatch):
    work = tmp_path / built.name
    work.write_bytes(built.read_bytes())
    breaks = [
        ("threshold = null", "threshold is not null"),  # not_null
        ("slice = 'bogus'", "slice in ('overall', 'domain', 'disability', 'domain_disability')"),
        ("slice = null", "slice is not null"),  # a null passes accepted_values, not not_null
        ("n_degraded = -1", "n_degraded >= 0"),  # between
        (
            "n_truncated = null",
            "n_truncated is not null; n_degraded <= n_pairs and n_truncated <= n_pairs",
        ),
        ("n_truncated = n_pairs + 1", "n_degraded <= n_pairs and n_truncated <= n_pairs"),
    ]
    with duckdb.connect(str(work)) as con:
        rows = [
            r
            for (r,) in con.execute(
                # rows without an interval: a null slice breaks no rule tying vs_overall to it
                "select rowid from main.degradation where rate_ci_low_pct is null order by rowid"
            ).fetchall()
        ]
        assert len(rows) > len(breaks)
        assert con.execute(
            "select count(*) from main.degradation where degradation_pct is null"
        ).fetchone()[0]  # a null in a range passes: some rates are null and the test passes
        for rowid, (change, _) in zip(rows, breaks):
            con.execute(f"update main.degradation set {change} where rowid = {rowid}")
    monkeypatch.delenv("DBT_EXCLUDE_RESOURCE_TYPES", raising=False)
    with pytest.raises(runner.DbtError) as failed:
        runner.run_dbt(["test", "--select", "degradation,test_name:row_checks"], work)
    message = str(failed.value)
    assert "row_checks_degradation" in message and f"{len(breaks)} failing rows" in message
    assert "Rules the failing rows break:" in message
    broken = {line.strip() for line in message.splitlines() if line.strip().startswith("broken: ")}
    assert broken == {f"broken: {rule} (1 row)" for _, rule in breaks}


def test_a_new_warehouse_at_the_path_of_a_built_one_is_built_in_full(built, tmp_path, capsys):
    """Deleting the warehouse is how one starts over: the new file has no stamp, whatever the
    old file's said, and a stamp file an older version left beside it is ignored."""
    work = _copy(built, tmp_path / "work")
    old = {"built_at": "2026-01-01T00:00:00+00:00", "inputs": build_stamp.inputs(work, None)}
    work.with_name(work.name + ".build.json").write_text(json.dumps(old))
    work.unlink()
    connect(work).close()
    land(work, synthetic_generations())
    assert _stamp(work) is None
    assert _build(work, capsys).startswith("Built")
    assert_as_from_scratch(work, built, relanded=True)
    assert _build(work, capsys).startswith("Nothing changed")


def test_a_restored_backup_of_an_older_project_is_rebuilt_seeds_and_views_included(
    built, tmp_path, capsys
):
    """A copy built under another seed and another view, restored over the warehouse: its own
    stamp names the older project, so every seed and view is built again."""
    backup = _copy(built, tmp_path / "backup")
    with duckdb.connect(str(backup)) as con:
        con.execute(
            "update main.disabilities set display_name = 'Deaf or hard of hearing' "
            "where disability_id = 'hearing'"
        )
        con.execute(
            "create or replace view main.stg_seeds__metrics as "
            "select * from main.metrics where metric != 'verbosity'"
        )
        (text,) = con.execute(f"select stamp from {build_stamp.STAMP}").fetchone()
        stamp = dict(json.loads(text))
        stamp["inputs"]["project"] = "the digest of an older project"
        con.execute(f"update {build_stamp.STAMP} set stamp = ?", [json.dumps(stamp)])
    work = _copy(built, tmp_path / "work")
    shutil.copy2(backup, work)  # restored over the current warehouse, beside its files
    assert _build(work, capsys).startswith("Built")
    assert_as_from_scratch(work, built)


def test_a_dbt_build_with_other_vars_does_not_outlive_the_next_build(built, tmp_path, capsys):
    work = _copy(built, tmp_path / "work")
    other = "{degradation_threshold: 0.2, sensitivity_thresholds: [0, 0.3]}"
    runner.run_dbt(["build", "--select", "int_pair_thresholds+", "--vars", other], work)
    rows = "select count(*) as n from main.threshold_sensitivity"
    assert read(work, rows).n[0] != read(built, rows).n[0]
    assert _build(work, capsys).startswith("Built")
    assert_as_from_scratch(work, built)


@pytest.mark.parametrize("command", ["dbt seed", "ableaudit gate --vars", "training build"])
def test_any_other_dbt_command_makes_the_next_build_a_full_one(
    built, tmp_path, capsys, command, dbt_calls
):
    work = _copy(built, tmp_path / "work")
    if command == "dbt seed":
        runner.run_dbt(["seed", "--select", "disabilities"], work)
    elif command == "ableaudit gate --vars":
        gates = PROJECT_ROOT / "configs" / "gates.example.yml"
        argv = ["gate", "--warehouse", str(work), "--gates", str(gates)]
        main([*argv, "--vars", "{degradation_threshold: 0.3}"])  # its verdicts do not matter
    else:
        from ableaudit.adapters import tasks

        tasks.build.fn(str(work), "+preference_pairs", "{preference_heldout_share: 0.5}")
    assert build_stamp.last_stamp(work) is None
    assert _build(work, capsys).startswith("Built")
    assert dbt_calls == [
        {
            "vars": None,
            "all_tests": False,
            "project_checked": False,
            "changed_raw_tables": None,
            "ungated": False,
        }
    ]


def _second_run(rows: list[dict]) -> list[dict]:
    """Each model's answers again, in a run of its own, with other texts: a run to compare."""
    rng = random.Random(1)
    again = []
    for r in rows:
        parts = (r["model_id"], r["arm"], r["query_id"], r["disability_id"], 2)
        text = response(rng) if r["status"] == "ok" else r["response_text"]
        again.append(
            {**r, "run_id": f"{r['run_id']}-2", "generation_id": generation_id(*parts)}
            | {"response_text": text}
        )
    return again


@pytest.mark.long
def test_a_gate_with_other_vars_does_not_outlive_the_next_build(tmp_path, capsys):
    """`ableaudit gate --vars` rebuilds the per-run models with its vars on a warehouse of two
    runs; the next plain build brings back what the project's vars make of them, as the
    build from scratch of the same raw rows does."""
    fresh = tmp_path / "fresh" / "ableaudit.duckdb"
    fresh.parent.mkdir()
    connect(fresh).close()
    first = synthetic_generations()
    land(fresh, first)
    land(fresh, _second_run(first))
    assert main(["build", "--warehouse", str(fresh)]) == 0
    for table in ("int_run_pair_flags", "run_rates", "run_comparison"):
        assert len(read(fresh, f"select * from main.{table}")), table
    work = _copy(fresh, tmp_path / "work")
    gates = PROJECT_ROOT / "configs" / "gates.example.yml"
    argv = ["gate", "--warehouse", str(work), "--gates", str(gates)]
    main([*argv, "--vars", "{degradation_threshold: 0.3}"])  # its verdicts do not matter
    flagged = "select count(*) filter (flagged) as n from main.int_run_pair_flags"
    assert read(work, flagged).n[0] != read(fresh, flagged).n[0]
    assert build_stamp.last_stamp(work) is None
    assert _build(work, capsys).startswith("Built")
    assert_as_from_scratch(work, fresh)


@pytest.mark.parametrize("command", ["judges' subjects", "prompts", "training build"])
def test_a_build_of_part_of_the_warehouse_with_the_projects_vars_keeps_the_stamp(
    built, tmp_path, capsys, command
):
    """What the judges, the prompts and the training flows build first, with the project's
    vars, is what the stamped build made of the same raw rows: the next build is skipped."""
    work = _copy(built, tmp_path / "work")
    stamped = build_stamp.last_stamp(work)
    if command == "judges' subjects":
        from ableaudit.judges.runner import build_subjects

        build_subjects(work)
    elif command == "prompts":
        from ableaudit.dbt.prompts import ensure_prompts

        assert ensure_prompts(work)  # no prompts stamp beside the copy: dbt runs
    else:
        from ableaudit.adapters import tasks

        tasks.build.fn(str(work), "+int_pair_judgments")
    with duckdb.connect(str(work), read_only=True) as con:
        last = build_stamp.last_invocation(con)
    assert build_stamp.stamped_invocation(work) == last  # the command's, carried over
    assert build_stamp.last_stamp(work) == stamped
    assert _build(work, capsys).startswith("Nothing changed")
    assert_as_from_scratch(work, built)


def test_a_part_built_under_other_settings_than_the_stamps_drops_it(
    built, tmp_path, capsys, monkeypatch
):
    """The project's vars under another setting (here the Regard classifier) than the stamped
    build's: the nodes built are not what the stamp says, so it is dropped."""
    from ableaudit.judges.runner import build_subjects

    work = _copy(built, tmp_path / "work")
    monkeypatch.setenv("ABLEAUDIT_REGARD_MODEL", str(tmp_path / "another-missing-model"))
    build_subjects(work)
    assert _stamp(work) is None and build_stamp.last_stamp(work) is None


def test_a_build_without_the_gate_tests_never_lets_a_build_be_skipped(built, tmp_path, dbt_calls):
    """The audit flow's build with a gates file leaves out the gate_rule tests (its release
    gate reads gate_results after the publish): its stamp narrows the next build with the
    same vars, never skips it."""
    from ableaudit.build import build_and_publish
    from ableaudit.gates.command import build_vars

    work = _copy(built, tmp_path / "work")
    vars = build_vars(PROJECT_ROOT / "configs" / "gates.example.yml")
    assert not build_and_publish(work, vars, ungated=True).skipped
    assert _stamp(work)["gate_tests"] is False and build_stamp.last_stamp(work) is not None
    assert not build_and_publish(work, vars, ungated=True).skipped
    assert not build_and_publish(work, vars).skipped
    assert [(c["ungated"], c["project_checked"]) for c in dbt_calls] == [
        (True, False),
        (True, False),
        (False, True),
    ]


def test_a_moved_warehouse_names_the_files_beside_it_never_the_old_folders(
    built, tmp_path, capsys, dbt_calls
):
    moved = tmp_path / "elsewhere" / built.name
    moved.parent.mkdir()
    shutil.copy2(built, moved)  # the warehouse alone: its published copy and report stay
    stamp, current = build_stamp.last_stamp(moved), build_stamp.inputs(moved, None)
    assert stamp is not None
    assert {k for k, v in current.items() if stamp["inputs"][k] != v} == set()
    out = _build(moved, capsys)
    assert out.startswith("Built") and str(built.parent) not in out, out
    assert str(moved.parent / "published") in out
    # its tables are what its stamp says: what the project fixes alone is not built again
    assert dbt_calls[0]["project_checked"] is True
    # the folder copied whole: kept, and named where it is now
    copied = _copy(built, tmp_path / "copy")
    out = _build(copied, capsys)
    assert out.startswith("Nothing changed") and str(built.parent) not in out, out
    assert str(copied.parent / "published") in out


@pytest.mark.long
def test_a_build_under_the_paper_literal_rule_passes_its_unit_tests(
    built, tmp_path, capsys, monkeypatch
):
    """The unit tests pin the vars they expect: a build under the user's vars runs them all."""
    monkeypatch.delenv("DBT_EXCLUDE_RESOURCE_TYPES", raising=False)  # the suite's: every test
    work = _copy(built, tmp_path / "work")
    out = _build(work, capsys, "--vars", "{degradation_rule: paper_literal}")
    assert out.startswith("Built")
    rules = read(work, "select distinct degradation_rule as rule from main.degradation")
    # the pair metrics (similarity, parity) keep their own threshold rules
    assert "paper_literal" in set(rules.rule) and "strict_relative" not in set(rules.rule)
