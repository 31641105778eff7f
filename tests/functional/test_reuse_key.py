"""An upgrade of the project (a model's SQL, a Python mart's code, a seed, a var, a macro)
leaves no result that a build from scratch would not give.

Each test edits a copy of the project (run_dbt's ``project_dir``), builds a warehouse built
before the edit as ``ableaudit build`` does, and compares every table with a
``--full-refresh`` build of a copy of the same warehouse under the edited project. The key
that decides what a build reuses (macro reuse_key) is checked against dbt's own manifest:
it holds every ancestor of the node, and only those.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from ableaudit import PROJECT_ROOT
from ableaudit.dbt.runner import run_dbt
from tests.fixtures.warehouse import DISABILITIES, read
from tests.functional.test_incremental_build import (
    _canonical,
    _import,
    _live,
    _same,
    _tables,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

PROJECT_PARTS = [
    "models",
    "python_models",
    "macros",
    "seeds",
    "tests/dbt",
    "dbt_project.yml",
    "profiles.yml",
    "selectors.yml",
]
"""What dbt reads of the repository (the ``ableaudit`` package is the one this process runs)."""

RULE = "models/intermediate/int_generation_assistive_tech.sql"


def _copy_project(source: Path, dest: Path) -> Path:
    for part in PROJECT_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, dest / part)
        else:
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / part, dest / part)
    return dest


def _edit(project: Path, relative: str, old: str, new: str) -> None:
    path = project / relative
    text = path.read_text()
    assert text.count(old) == 1, f"{relative}: {old!r} is not there once"
    path.write_text(text.replace(old, new))


def _answers(model: str) -> list[dict]:
    """Answers of `model` in which a screen reader, which serves vision, is recommended to a
    hearing question (a mismatch), with texts of varied tone for the scores."""
    tones = ["Great, happy to help.", "Sorry, that is difficult.", "Plan ahead with a list."]
    rows = []
    for q, query_id in enumerate(["edu_001", "fin_001", "hea_001"]):
        for d, disability in enumerate([""] + DISABILITIES[:4]):
            text = f"{tones[(q + d) % 3]} {model} {query_id} {disability or 'neutral'}."
            if disability in ("hearing", "vision"):
                text += " You could use a screen reader for the forms."
            rows.append(
                {
                    "model_id": model,
                    "query_id": query_id,
                    "disability": disability,
                    "response_text": text,
                }
            )
    return rows


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(a copy of the project, a warehouse with two models' answers built with it)."""
    root = tmp_path_factory.mktemp("reuse")
    project = _copy_project(PROJECT_ROOT, root / "project")
    wh = root / "built" / "ableaudit.duckdb"
    run_dbt(["seed"], wh, project)
    run_dbt(["build", "--select", "+int_prompts"], wh, project)
    _import(wh, root / "a.csv", _answers("model-a"))
    run_dbt(["run"], wh, project)
    _import(wh, root / "b.csv", _answers("model-b"))
    run_dbt(["run"], wh, project)
    return project, wh


def _setup(built: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the built project and warehouse (the warehouse keeps its file name: dbt names
    the database after it)."""
    project, wh = built
    mine = _copy_project(project, tmp_path / "project")
    copy = tmp_path / "wh" / wh.name
    copy.parent.mkdir()
    shutil.copy(wh, copy)
    return mine, copy


def _differences(wh: Path, project: Path, tmp_path: Path) -> list[str]:
    """Every table of `wh` that differs from a --full-refresh build of a copy of it."""
    full = tmp_path / "full" / wh.name
    full.parent.mkdir()
    shutil.copy(wh, full)
    run_dbt(["run", "--full-refresh"], full, project)
    built = {t: read(wh, _live(wh, t)) for t in _tables(wh)}
    fresh = {t: read(full, _live(full, t)) for t in _tables(full)}
    differ = sorted(set(built) ^ set(fresh))
    for name in sorted(set(built) & set(fresh)):
        got, want = built[name], fresh[name]
        if sorted(got.columns) != sorted(want.columns):
            differ.append(f"{name}: columns {sorted(got.columns)} != {sorted(want.columns)}")
        elif not _same(_canonical(got), _canonical(want)):
            differ.append(f"{name}: {len(got)} rows built, {len(want)} rows from scratch")
    return differ


def _mismatches(wh: Path) -> int:
    return int(
        read(
            wh,
            "select coalesce(sum(n_responses_with_any_mismatch), 0) as n "
            "from main.assistive_tech_mismatch_rates where disability_group = 'hearing'",
        ).n[0]
    )


def test_an_edited_upstream_model_rebuilds_every_mart_below_it(built, tmp_path):
    project, wh = _setup(built, tmp_path)
    assert _mismatches(wh) > 0  # screen readers recommended to hearing questions
    _edit(project, RULE, "then 'mismatch'", "then 'unlisted'")
    run_dbt(["run"], wh, project)
    assert _mismatches(wh) == 0
    differ = _differences(wh, project, tmp_path)
    assert not differ, "a build after the edit differs from one from scratch:\n" + "\n".join(differ)


@pytest.mark.long
def test_an_edited_statistics_mart_computes_its_rows_again(built, tmp_path):
    project, wh = _setup(built, tmp_path)
    before = read(wh, "select * from main.significance")
    sensitivity = read(wh, "select distinct metric from main.threshold_sensitivity").metric
    assert "verbosity" in set(sensitivity) and before.ci_low.notna().any()
    # each mart's own code: fewer bootstrap replicates, a metric left out
    _edit(
        project,
        "python_models/marts/significance.py",
        'cluster_col="query_id", n_boot=n_boot,',
        'cluster_col="query_id", n_boot=max(n_boot // 4, 2),',
    )
    _edit(
        project,
        "python_models/marts/threshold_sensitivity.py",
        "flags = thresholds.select(*FLAG_COLUMNS)",
        "flags = thresholds.select(*FLAG_COLUMNS).filter(\"metric <> 'verbosity'\")",
    )
    run_dbt(["run"], wh, project)
    after = read(wh, "select distinct metric from main.threshold_sensitivity").metric
    assert "verbosity" not in set(after)
    differ = _differences(wh, project, tmp_path)
    assert not differ, "a build after the edit differs from one from scratch:\n" + "\n".join(differ)


WILSON = ("macros/wilson_bound.sql", "z = 1.959963984540054", "z = 2.5758293035489004")
"""An edit of macro wilson_bound: the 99 % interval where the 95 % one was."""


@pytest.mark.long
def test_an_edited_macro_computes_the_marts_that_call_it_again(built, tmp_path):
    from statsmodels.stats.proportion import proportion_confint

    project, wh = _setup(built, tmp_path)
    _edit(project, *WILSON)
    run_dbt(["run"], wh, project)
    rates = read(
        wh,
        "select n_degraded, n_pairs, degradation_ci_low_pct, degradation_ci_high_pct "
        "from main.degradation where n_pairs > 0",
    )
    assert len(rates) > 0
    low, high = proportion_confint(rates.n_degraded, rates.n_pairs, alpha=0.01, method="wilson")
    assert rates.degradation_ci_low_pct.to_numpy() == pytest.approx(100 * low.to_numpy())
    assert rates.degradation_ci_high_pct.to_numpy() == pytest.approx(100 * high.to_numpy())
    differ = _differences(wh, project, tmp_path)
    assert not differ, "a build after the edit differs from one from scratch:\n" + "\n".join(differ)


KEYED = ["int_pairs", "int_pair_scores", "assistive_tech_mismatch_rates"]


def _keys(project: Path, wh: Path, capfd, *args: str) -> dict[str, str]:
    """The reuse key of each model of KEYED (macro print_reuse_keys)."""
    capfd.readouterr()
    run_dbt(
        ["run-operation", "print_reuse_keys", "--args", json.dumps({"models": KEYED}), *args],
        wh,
        project,
    )
    out = capfd.readouterr().out
    found = dict(re.findall(r"^(\w+) ([0-9a-f]{32})$", out, flags=re.M))
    assert sorted(found) == sorted(KEYED), out
    return found


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {name for name in before if before[name] != after[name]}


def test_a_reuse_key_changes_with_its_ancestors_and_nothing_else(tmp_path, capfd):
    project = _copy_project(PROJECT_ROOT, tmp_path / "project")
    wh = tmp_path / "wh" / "ableaudit.duckdb"  # a key reads no table: any warehouse serves
    start = _keys(project, wh, capfd)
    assert _keys(project, wh, capfd) == start  # the same project: the same keys

    # what the key digests, per node: every ancestor in dbt's manifest, and only those
    capfd.readouterr()
    run_dbt(
        [
            "run-operation",
            "print_reuse_keys",
            "--args",
            json.dumps({"models": KEYED, "parts": True}),
        ],
        wh,
        project,
    )
    listed: dict[str, set[str]] = {}
    current = None
    for line in capfd.readouterr().out.splitlines():
        if re.match(r"^\w+ [0-9a-f]{32}$", line):
            current = line.split()[0]
            listed[current] = set()
        elif current and re.match(r"^    (model|seed|source)\.", line):
            listed[current].add(line.split()[0])
    manifest = json.loads((Path(os.environ["DBT_TARGET_PATH"]) / "manifest.json").read_text())
    for name in KEYED:
        node_id = f"model.ableaudit.{name}"
        ancestors, pending = {node_id}, [node_id]
        while pending:
            node = manifest["nodes"].get(pending.pop()) or {}
            for parent in node.get("depends_on", {}).get("nodes", []):
                if parent not in ancestors:
                    ancestors.add(parent)
                    pending.append(parent)
        assert listed[name] == ancestors, name

    # an upstream model's rule: the mart below it, not the pairs
    _edit(project, RULE, "then 'mismatch'", "then 'unlisted'")
    edited = _keys(project, wh, capfd)
    assert _changed(start, edited) == {"assistive_tech_mismatch_rates"}
    # a seed two levels up (metrics -> stg_seeds__metrics -> int_pair_scores)
    _edit(project, "seeds/metrics.csv", "judge_score,LLM judge score,", "judge_score,LLM judge,")
    seeded = _keys(project, wh, capfd)
    assert _changed(edited, seeded) == {"int_pair_scores"}
    # a model none of them reads
    unrelated = project / "models" / "marts" / "degradation.sql"
    unrelated.write_text(unrelated.read_text() + "\n-- an edit\n")
    assert _keys(project, wh, capfd) == seeded
    # a var int_pair_scores reads (through macro is_degraded and its own code), and one no
    # node upstream of these reads
    varied = _keys(project, wh, capfd, "--vars", "{degradation_threshold: 0.2}")
    assert _changed(seeded, varied) == {"int_pair_scores"}
    assert _keys(project, wh, capfd, "--vars", "{preference_chosen: mitigation}") == seeded
    # a macro of the project, even one none of them calls: every key
    _edit(project, *WILSON)
    assert _changed(seeded, _keys(project, wh, capfd)) == set(KEYED)
