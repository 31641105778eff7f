"""Every build equals a build from scratch, whatever happened before it.

Hypothesis draws sequences of what users do to a warehouse and its project: land answers,
forget a landing, replace answers, land verdicts and ratings, build or gate with other vars,
run dbt directly, edit a seed, a model, a macro or a statistics function, delete the
warehouse and start over, restore an older copy, copy the warehouse elsewhere, kill a build
mid-dbt or mid-publish. After each step the test builds as a user would (`ableaudit build`,
as a command, with a copy of the repository as its code) and compares every relation of
``main``, of the published copy and of the Parquet with a build from scratch of the same raw
rows and project (tests/fixtures/differential.py).

Both draws take every action (``KNOWN_STALE_ACTIONS``, the actions known to leave numbers a
build from scratch does not give, is empty); ``FOUND_STALE`` runs the sequences that once did.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.fixtures.differential import (
    Cli,
    CommandFailed,
    Fresh,
    copy_project,
    differences,
    everything,
    published_path,
)
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer
from tests.fixtures.warehouse import DISABILITIES

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

# What a build reads of the project (a change elsewhere, e.g. in docs/, changes no table).
PROJECT_PARTS = (
    "ableaudit",
    "models",
    "macros",
    "seeds",
    "python_models",
    "tests/dbt",
    "dbt_project.yml",
    "selectors.yml",
    "profiles.yml",
)
QUERIES = ["edu_001", "fin_001", "hea_001", "tec_001"]
TONES = [
    "Great, happy to help: a screen reader and captions will do.",
    "Sorry, that is difficult and risky.",
    "Plan ahead with a list of options and ask for details.",
]
VARS = "{degradation_threshold: 0.2, sensitivity_thresholds: [0, 0.3]}"
# Actions whose next build differs from a build from scratch: the draw leaves them out unless
# ABLEAUDIT_DIFF_ALL=1. None is known (docs/incremental.md); an action added here names why.
KNOWN_STALE_ACTIONS: frozenset[str] = frozenset()
ALL_ACTIONS_ENV = "ABLEAUDIT_DIFF_ALL"
# (file, text, replacement): an edit a step makes to the project copy, and undoes when drawn
# again. Each changes some table's rows.
EDITS = {
    "edit_seed": (
        "seeds/disabilities.csv",
        "hearing,Hearing impairments,Hearing,",
        "hearing,Deaf and hard of hearing,Deaf/HoH,",
    ),
    "edit_model_sql": (
        "models/intermediate/int_generation_assistive_tech.sql",
        "when technology_disabilities.fit is null then 'mismatch'",
        "when technology_disabilities.fit is null then 'unlisted'",
    ),
    "edit_macro": (
        "macros/wilson_bound.sql",
        "{%- set z = 1.959963984540054 -%}",
        "{%- set z = 2.5758293035489004 -%}",
    ),
    "edit_stats": (
        "ableaudit/stats/paired.py",
        '"sd_diff": float(np.std(diff, ddof=1)) if n >= 2 else nan,',
        '"sd_diff": float(np.std(diff, ddof=0)) if n >= 2 else nan,',
    ),
}


def _rows(model: str, queries: list[str], tag: str) -> list[dict]:
    """Answers of one model to the neutral and three disability prompts of each query."""
    rows = []
    for q, query_id in enumerate(queries):
        for d, disability in enumerate(["", *DISABILITIES[:3]]):
            text = f"{TONES[(q + d) % 3]} {model} {query_id} {disability or 'neutral'} {tag}."
            rows.append(
                {
                    "model_id": model,
                    "query_id": query_id,
                    "disability": disability,
                    "response_text": TONES[2] if d == 3 else text,  # a text shared across rows
                }
            )
    return rows


@dataclass
class World:
    """One sequence's warehouse, project copy and what it did."""

    cli: Cli
    fresh: Fresh
    server: FakeOpenAIServer
    """The OpenAI-compatible server an audit asks."""
    folder: Path
    wh: Path
    imports: list[tuple[Path, bool]] = field(default_factory=list)
    """Each responses file imported, with whether it replaced rows."""
    backups: list[Path] = field(default_factory=list)
    n: int = 0

    def file(self, name: str) -> Path:
        self.n += 1
        return self.folder / "files" / f"{self.n:02d}-{name}"

    def at(self) -> list[str]:
        return ["--warehouse", str(self.wh)]

    def query(self, sql: str) -> pd.DataFrame:
        con = duckdb.connect(str(self.wh), read_only=True)
        try:
            return con.execute(sql).df()
        finally:
            con.close()

    def import_file(self, rows: list[dict], replace: bool = False) -> None:
        path = self.file("responses.csv")
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(path, index=False)
        self.cli.run(
            ["import", "responses", str(path), *self.at(), *(["--replace"] if replace else [])]
        )
        self.imports.append((path, replace))


# --- the actions ------------------------------------------------------------------------


def import_responses(w: World) -> None:
    w.import_file(_rows(f"model-{w.n}", QUERIES[1:3], "new"))  # one more model


def import_replace(w: World) -> None:
    """The first file imported again with two answers corrected."""
    first = pd.read_csv(w.imports[0][0], keep_default_na=False).to_dict("records")
    for row in first[:2]:
        row["response_text"] += f" Corrected {w.n}."
    w.import_file(first, replace=True)


def forget(w: World) -> None:
    """`ableaudit forget` the newest landing still in place (it builds, as it does)."""
    landings = w.query(
        "select landing_id from raw.landings where status = 'landed' "
        "and kind like 'import-%' order by started_at desc limit 1"
    ).landing_id
    if len(landings):
        w.cli.run(["forget", landings[0], "--yes", *w.at()])


def import_judgments(w: World) -> None:
    pairs = w.query(
        "select neutral_generation_id, disability_generation_id from main.int_pairs "
        "where pair_status = 'complete' order by pair_id limit 2"
    )
    if pairs.empty:
        return
    rubric = {
        "relevance": 3,
        "completeness": 2,
        "accuracy": w.n % 4,
        "clarity": 1,
        "declined": False,
        "score": 1 + w.n % 9,
    }
    contrastive = {
        "interpret": "Yes",
        "stereotype": ["No", "Yes"][w.n % 2],
        "framing": "Ambiguous",
        "decline_in_response_a": False,
        "decline_in_response_b": False,
    }
    judge = {"judge_name": f"ext-{w.n}", "judge_model": "m"}
    lines = []
    for pair in pairs.itertuples():
        lines.append(
            judge
            | {"kind": "rubric", "generation_id": pair.disability_generation_id}
            | {"raw_output": json.dumps(rubric)}
        )
        lines.append(
            judge
            | {"kind": "contrastive", "neutral_generation_id": pair.neutral_generation_id}
            | {"disability_generation_id": pair.disability_generation_id}
            | {"raw_output": json.dumps(contrastive)}
        )
    path = w.file("verdicts.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    w.cli.run(["import", "judgments", str(path), *w.at()])


def import_annotations(w: World) -> None:
    """An annotation sample exported, rated by one annotator and imported."""
    out = w.file("sample")
    w.cli.run(
        ["export", "annotation-sample", str(out), "--kind", "rubric"]
        + ["--size-per-domain", "3", "--seed", str(w.n), *w.at()]
    )
    items = pd.read_csv(out / "items.csv", keep_default_na=False)
    if items.empty:
        return
    items["annotator_id"] = f"ann-{w.n}"
    items["judge_score"] = [1 + (i + w.n) % 10 for i in range(len(items))]
    items.to_csv(out / "rated.csv", index=False)
    w.cli.run(["import", "annotations", str(out / "rated.csv"), *w.at()])


def audit(w: World) -> None:
    """`ableaudit audit` of a small subset against the local OpenAI-compatible test server (its
    build left to the step's own)."""
    config = {
        "name": "differential",
        "build": False,
        "subset": {"per_domain": 1, "disabilities": ["hearing", "vision"], "seed": w.n},
        "targets": [
            {
                "name": "echo",
                "backend": "openai",
                "model": SERVED_ID,
                "base_url": w.server.base_url,
                "batch_size": 4,
                "api_key_env": "ABLEAUDIT_TEST_NO_SUCH_KEY",
                "options": {"max_retries": 0},
                "decoding": {"max_new_tokens": 24},
            }
        ],
    }
    path = w.file("audit.yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    w.cli.run(["audit", "--config", str(path), *w.at()])


def build_vars(w: World) -> None:
    w.cli.run(["build", "--vars", VARS, *w.at()])


def gate_vars(w: World) -> None:
    """`ableaudit gate --vars`: its exit status is the gates' verdict, not this test's."""
    w.cli.run(
        ["gate", "--gates", "configs/gates.example.yml", "--vars", "{degradation_threshold: 0.3}"]
        + w.at(),
        check=False,
    )


def dbt_build_vars(w: World) -> None:
    w.cli.run(["dbt", "build", "--vars", VARS], warehouse=w.wh)


def dbt_seed_edited(w: World) -> None:
    """A seed edited, `dbt seed`, and the edit undone (the next build reads the file as it was)."""
    toggle(w, "edit_seed")
    try:
        w.cli.run(["dbt", "seed"], warehouse=w.wh)
    finally:
        toggle(w, "edit_seed")


def toggle(w: World, edit: str) -> None:
    name, text, replacement = EDITS[edit]
    path = w.cli.project / name
    source = path.read_text()
    if text in source:
        path.write_text(source.replace(text, replacement))
    else:
        assert replacement in source, f"{name} holds neither side of the edit {edit}"
        path.write_text(source.replace(replacement, text))


def _edit(edit: str) -> Callable[[World], None]:
    def action(w: World) -> None:
        toggle(w, edit)

    action.__name__ = edit
    return action


def _files_of(wh: Path) -> list[Path]:
    """The warehouse, its write-ahead log and the stamp beside it."""
    return [p for p in wh.parent.glob(f"{wh.name}*") if p.is_file()]


def backup(w: World) -> None:
    """A copy of the warehouse file as it is now (a user's backup; restored by a later step)."""
    target = w.file("backup")
    target.mkdir(parents=True)
    for path in _files_of(w.wh):
        if path.suffix != ".json":
            shutil.copy2(path, target / path.name)
    w.backups.append(target)


def restore_backup(w: World) -> None:
    """The newest backup (without one, the warehouse as the sequence found it) copied back over
    the warehouse; the stamp beside it is left as it is."""
    for path in _files_of(w.wh):
        if path.suffix != ".json":
            path.unlink()
    for path in w.backups[-1].iterdir():
        if path.is_file() and path.name.startswith(w.wh.name) and path.suffix != ".json":
            shutil.copy2(path, w.wh.parent / path.name)


def delete_warehouse(w: World) -> None:
    """The warehouse file deleted (the usual way to start over), every file imported again."""
    for path in _files_of(w.wh):
        if path.suffix != ".json":
            path.unlink()
    done, w.imports = w.imports, []
    for path, replace in done:
        w.import_file(pd.read_csv(path, keep_default_na=False).to_dict("records"), replace)


def copy_elsewhere(w: World) -> None:
    """The warehouse, with what lies beside it under its name, copied to another folder, where
    the next steps go on."""
    target = w.file("elsewhere") / w.wh.name
    target.parent.mkdir(parents=True)
    for path in _files_of(w.wh):
        shutil.copy2(path, target.parent / path.name)
    w.wh = target


def kill_mid_dbt(w: World) -> None:
    """New answers, then a build killed once dbt has built a node, then (next) a plain build."""
    import_responses(w)
    log = w.cli.home / "logs" / "dbt.log"
    start = log.stat().st_size if log.is_file() else 0

    def a_node_built() -> bool:
        if not log.is_file():
            return False
        with log.open("rb") as f:
            f.seek(start)
            return b" OK created " in f.read()

    w.cli.kill_when(["build", *w.at()], a_node_built)


def kill_mid_publish(w: World) -> None:
    """New answers, then a build killed once the publish has started writing its copy."""
    import_responses(w)
    published = published_path(w.wh).parent

    def publishing() -> bool:
        return published.is_dir() and any(".tmp." in p.name for p in published.rglob(".*"))

    w.cli.kill_when(["build", *w.at()], publishing)


ACTIONS: dict[str, Callable[[World], None]] = {
    f.__name__: f
    for f in [
        import_responses,
        import_replace,
        forget,
        import_judgments,
        import_annotations,
        audit,
        build_vars,
        gate_vars,
        dbt_build_vars,
        dbt_seed_edited,
        *(_edit(e) for e in EDITS),
        backup,
        restore_backup,
        delete_warehouse,
        copy_elsewhere,
        kill_mid_dbt,
        kill_mid_publish,
    ]
}


def drawn_actions() -> list[str]:
    if os.environ.get(ALL_ACTIONS_ENV) == "1":
        return list(ACTIONS)
    return [name for name in ACTIONS if name not in KNOWN_STALE_ACTIONS]


# --- the sequences ----------------------------------------------------------------------


@dataclass
class Base:
    """A warehouse with one model's answers, built, and its folder's files (copied into each
    sequence's folder, at the same path, so the stamp's paths hold)."""

    cli: Cli
    fresh: Fresh
    server: FakeOpenAIServer
    folder: Path
    saved: Path

    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example
        return f"Base({self.folder})"

    def world(self) -> World:
        wh = self.folder / "warehouse" / "ableaudit.duckdb"
        return World(self.cli, self.fresh, self.server, self.folder, wh)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Base]:
    tmp = tmp_path_factory.mktemp("differential")
    project = copy_project(tmp / "project")
    cli = Cli(project, tmp / "dbt-user")
    fresh = Fresh(Cli(project, tmp / "dbt-fresh"), tmp / "fresh", PROJECT_PARTS)
    server = FakeOpenAIServer()
    try:
        made = Base(cli, fresh, server, tmp / "sequence", tmp / "saved")
        world = made.world()
        world.wh.parent.mkdir(parents=True)
        world.import_file(_rows("model-a", QUERIES[:2], "first"))
        cli.run(["build", *world.at()])
        shutil.copytree(made.folder, made.saved, symlinks=True)
        yield made
    finally:
        server.close()


def _start(base: Base) -> World:
    """The sequence's folder as the base left it, and the project copy as the repository is."""
    for edit in EDITS.values():
        shutil.copy2(Path(__file__).resolve().parents[2] / edit[0], base.cli.project / edit[0])
    shutil.rmtree(base.folder, ignore_errors=True)
    shutil.copytree(base.saved, base.folder, symlinks=True)
    world = base.world()
    world.imports = [(p, False) for p in sorted((base.folder / "files").glob("*.csv"))]
    world.n = len(world.imports)
    world.backups = [base.saved / "warehouse"]  # an older copy: the warehouse the base built
    return world


def check_sequence(base: Base, steps: list[str]) -> None:
    """Each step, then `ableaudit build`, then the comparison with a build from scratch."""
    w = _start(base)
    base.cli.log.clear()
    for i, name in enumerate(steps):
        where = f"step {i + 1} ({name}) of the sequence {steps}"
        try:
            ACTIONS[name](w)
            w.cli.run(["build", *w.at()])
        except CommandFailed as failed:
            raise AssertionError(f"{where}: {failed}\ncommands: {base.cli.log}") from None
        differ = differences(everything(w.wh), w.fresh.relations(w.wh))
        if differ:
            raise AssertionError(
                f"{where}: the build differs from a build from scratch in {len(differ)} "
                f"relations ({', '.join(d.split(':', 1)[0] for d in differ[:12])}"
                f"{', ...' if len(differ) > 12 else ''}); the first:\n{differ[0]}\n"
                f"commands: {base.cli.log}"
            )


def _sequences(steps: int):
    """Any actions, repeated or not (an edit drawn twice is undone)."""
    return st.lists(st.sampled_from(drawn_actions()), min_size=steps, max_size=steps)


def _distinct(steps: int):
    """Distinct actions in a drawn order: few sequences see many actions."""
    return st.permutations(drawn_actions()).map(lambda order: order[:steps])


# `make test-long`: 2 sequences of 2 distinct steps, then 100 of 6 drawn steps (docs/testing.md).
CI_SEQUENCES, CI_STEPS = 2, 2
LONG_SEQUENCES, LONG_STEPS = 100, 6
_SETTINGS = dict(
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    print_blob=False,
    report_multiple_bugs=False,
)


@pytest.mark.long
@pytest.mark.timeout(1800)  # 7.9 minutes with the base build on 2 shared cores under load
@settings(max_examples=CI_SEQUENCES, **_SETTINGS)
@given(steps=_distinct(CI_STEPS))
def test_every_build_equals_a_build_from_scratch(base, steps):
    check_sequence(base, steps)


@pytest.mark.long
@pytest.mark.timeout(0)
@settings(max_examples=LONG_SEQUENCES, **_SETTINGS)
@given(steps=_sequences(LONG_STEPS))
def test_every_build_equals_a_build_from_scratch_long(base, steps):
    check_sequence(base, steps)


# Sequences that once found a build differing from a build from scratch (docs/testing.md): each
# is a regular test, marked `long` but for the quickest, which the default run keeps.
FOUND_STALE = [
    ["delete_warehouse"],
    ["edit_seed", "restore_backup"],
    ["edit_model_sql"],
    ["edit_macro"],
    ["dbt_build_vars"],
    ["dbt_seed_edited"],
    ["audit", "gate_vars"],
    ["copy_elsewhere"],
]
QUICK_FOUND_STALE = [["edit_macro"], ["copy_elsewhere"], ["dbt_seed_edited"]]


@pytest.mark.timeout(3600)
@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(
            steps,
            id=",".join(steps),
            marks=[] if steps in QUICK_FOUND_STALE else [pytest.mark.long],
        )
        for steps in FOUND_STALE
    ],
)
def test_the_sequences_that_found_stale_builds(base, steps):
    check_sequence(base, steps)
