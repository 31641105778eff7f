"""An incremental build gives what a full rebuild of the same raw layer gives.

The warehouse lands responses in steps: one model, then a second model with the
neutral answer the first one lacked (a new landing superseding a pair), then the
second landing forgotten, then a corrected file imported with ``--replace``. After
each step it builds as `ableaudit build` does (incremental where it can), and every
table dbt builds (marts, incremental models, scores) must equal, row for row, a
``dbt build --full-refresh`` of a copy of the same warehouse.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from ableaudit.cli import main
from ableaudit.dbt.runner import run_dbt
from ableaudit.ingest.judgments import import_judgments
from ableaudit.ingest.responses import import_responses
from ableaudit.scorers.registry import registered
from ableaudit.warehouse import landing
from ableaudit.warehouse.publishing import catalog, fingerprints
from tests.fixtures.warehouse import DISABILITIES, read

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.usefixtures("dbt_env")]

INCREMENTAL = [
    "stg_raw__generations",
    "int_pairs",
    "int_pair_texts",
    "int_pair_scores",
    "pair_details",
]
# columns that say when a row was computed, not what it holds
BUILD_TIMES = {"scored_at"}
# incremental caches keyed by content, which keep what they computed for a text or a pair
# no longer landed (a forgotten landing's): compared on the texts and pairs still landed
TEXT_CACHES = sorted({entry.model for entry in registered().values()}) + ["response_assistive_tech"]
PAIR_CACHES = ["detector_verdicts"]
# keyed by a text and the mask set it was masked with: compared on those still masked
MASK_CACHES = ["response_scores_masked"]
# keyed by a pair's two texts: compared on the text pairs of the pairs still built
TEXT_PAIR_CACHES = ["response_pair_scores"]


RUBRIC = {
    "relevance": 3,
    "completeness": 2,
    "accuracy": 3,
    "clarity": 1,
    "declined": False,
    "score": 9,
}
CONTRASTIVE = {
    "interpret": "Yes",
    "stereotype": "No",
    "framing": "Ambiguous",
    "decline_in_response_a": False,
    "decline_in_response_b": False,
}


def _live(wh: Path, table: str) -> str:
    if table in MASK_CACHES:
        return (
            f"select * from main.{table} as cached where exists (select 1 from "
            "main.int_generation_masks as masks where masks.text_hash = cached.text_hash "
            "and masks.mask_digest = cached.mask_digest)"
        )
    if table in TEXT_CACHES:
        return (
            f"select * from main.{table} where text_hash in "
            "(select text_hash from main.stg_raw__generations)"
        )
    if table in PAIR_CACHES:
        return f"select * from main.{table} where pair_id in (select pair_id from main.int_pairs)"
    if table in TEXT_PAIR_CACHES:
        return (
            f"select * from main.{table} where exists (select 1 from main.int_pairs as p "
            "join main.stg_raw__generations as n on p.neutral_generation_id = n.generation_id "
            "join main.stg_raw__generations as d on p.disability_generation_id = d.generation_id "
            "where n.text_hash = neutral_text_hash and d.text_hash = disability_text_hash)"
        )
    return f"select * from main.{table}"


_TONES = ["Great, happy to help.", "Sorry, that is difficult.", "Plan ahead with a list."]


def _rows(model: str, queries: list[str], skip_neutral: str | None = None) -> list[dict]:
    rows = []
    for q, query_id in enumerate(queries):
        for d, disability in enumerate([""] + DISABILITIES[:4]):
            if disability == "" and query_id == skip_neutral:
                continue
            text = f"{_TONES[(q + d) % 3]} {model} {query_id} {disability or 'neutral'}."
            rows.append(
                {
                    "model_id": model,
                    "query_id": query_id,
                    "disability": disability,
                    "response_text": text if d != 3 else _TONES[0],  # a text shared across rows
                }
            )
    return rows


def _import(wh: Path, path: Path, rows: list[dict], replace: bool = False) -> str:
    pd.DataFrame(rows).to_csv(path, index=False)
    with landing.recording(wh, "import-responses", path, file=path) as rec:
        import_responses(path, wh, replace=replace)
    return rec.landing_id


def _tables(wh: Path) -> list[str]:
    names = read(
        wh,
        "select table_name from duckdb_tables() where schema_name = 'main' and not internal",
    ).table_name.tolist()
    return sorted(names)


def _canonical(frame: pd.DataFrame) -> list[tuple]:
    """Rows as tuples of plain values, columns by name, sorted (order-independent)."""
    frame = frame.drop(columns=[c for c in frame.columns if c in BUILD_TIMES])
    frame = frame[sorted(frame.columns)]

    def value(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        if isinstance(v, (str, int, bool, float)):
            return v
        return repr(v.tolist() if hasattr(v, "tolist") else v)

    rows = [tuple(value(v) for v in row) for row in frame.astype(object).itertuples(index=False)]
    # floats may differ in the last bits with the order rows were summed in: sort by the rest
    return sorted(rows, key=lambda r: repr([round(v, 6) if isinstance(v, float) else v for v in r]))


def _same(a: list[tuple], b: list[tuple]) -> bool:
    """Equal row for row, floats to 1e-9 (relative or absolute)."""

    def close(x, y) -> bool:
        if isinstance(x, float) and isinstance(y, (float, int)):
            return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
        return x == y

    return len(a) == len(b) and all(
        len(r) == len(s) and all(close(x, y) for x, y in zip(r, s)) for r, s in zip(a, b)
    )


def _fingerprints(wh: Path) -> dict[str, tuple]:
    """Per incremental model: the group fingerprints the build recorded (with their columns),
    and those the publish computes by hashing the table itself."""
    con = duckdb.connect(str(wh), read_only=True)
    try:
        built = fingerprints.built_fingerprints(con, wh.stem)
        out = {}
        for model in INCREMENTAL:
            columns = catalog.relation_columns(con, wh.stem, "main", model)
            listed = ", ".join(catalog.quote(c) for c, _ in columns)
            hashed = fingerprints.group_fingerprints(con, f'"{wh.stem}".main."{model}"', listed)
            described = ", ".join(f"{c} {t}" for c, t in columns)
            out[model] = (built.get(("main", model)), (described, hashed))
        return out
    finally:
        con.close()


def _assert_recorded_fingerprints(wh: Path, step: str) -> None:
    differ = [m for m, (built, hashed) in _fingerprints(wh).items() if built != hashed]
    assert not differ, f"{step}: recorded group fingerprints differ from the tables: {differ}"


def _assert_same_as_full_refresh(wh: Path, tmp_path: Path, step: str) -> None:
    """Build `wh` as a build does; then, at the same path (dbt re-parses on a new one), a full
    refresh of a copy of the raw layer, and compare every table. The group fingerprints each
    build records must be those of its tables."""
    run_dbt(["seed"], wh)
    run_dbt(["run"], wh)  # the models `build` builds; its data tests change no table
    _assert_recorded_fingerprints(wh, step)
    incremental = {t: read(wh, _live(wh, t)) for t in _tables(wh)}
    for model in INCREMENTAL:
        assert model in incremental, f"{step}: {model} is not a table"
    kept = tmp_path / "kept.duckdb"
    shutil.copy(wh, kept)
    run_dbt(["run", "--full-refresh"], wh)
    _assert_recorded_fingerprints(wh, f"{step} (full refresh)")
    full = {t: read(wh, _live(wh, t)) for t in _tables(wh)}
    shutil.copy(kept, wh)  # go on from the incremental state
    assert sorted(incremental) == sorted(full), step
    differ = []
    for name, frame in full.items():
        got = incremental[name]
        if sorted(got.columns) != sorted(frame.columns):
            differ.append(f"{name}: columns {sorted(got.columns)} != {sorted(frame.columns)}")
        elif not _same(_canonical(got), _canonical(frame)):
            differ.append(f"{name}: {len(got)} rows incremental, {len(frame)} rows full refresh")
    assert not differ, f"{step}: incremental build differs from a full refresh:\n" + "\n".join(
        differ
    )


def _assert_group_local_views(wh: Path, tmp_path: Path, step: str) -> None:
    """Each view that declares its rows of a model local (macro record_group_local_view, which
    lets the publish hash such a view only for the models whose input rows changed) gives a
    model the same rows when every other model's rows are gone from every table."""
    views = read(wh, "select relation from dbt_state.group_local_views").relation.tolist()
    assert len(views) >= 5, step
    models = read(wh, "select distinct model_id from main.stg_raw__generations").model_id.tolist()
    assert len(models) >= 2, step
    for model in models:
        alone = tmp_path / "alone.duckdb"
        shutil.copy(wh, alone)
        con = duckdb.connect(str(alone))
        try:
            grouped = con.execute(
                "select distinct schema_name, table_name from duckdb_tables() as t "
                "join duckdb_columns() as c using (database_name, schema_name, table_name) "
                "where c.column_name = 'model_id' and schema_name <> 'dbt_state' and not t.internal"
            ).fetchall()
            for schema, table in grouped:
                con.execute(
                    f'delete from "{schema}"."{table}" where model_id is distinct from ?', [model]
                )
            seen = 0
            for view in views:
                query = f"select * from {view} where model_id = '{model}'"
                kept = con.execute(query).df()
                whole = read(wh, query)
                seen += len(whole)
                assert _same(_canonical(kept), _canonical(whole)), (
                    f"{step}: {view} gives {model} other rows without the other models' rows"
                )
            assert seen, f"{step}: no declared view holds rows of {model}"
        finally:
            con.close()
            alone.unlink()


def _state(wh: Path) -> pd.DataFrame:
    return read(wh, "select model, count(*) as n from dbt_state.incremental_state group by model")


@pytest.mark.long
def test_incremental_builds_equal_a_full_refresh_after_each_landing(tmp_path, capsys):
    wh = tmp_path / "ableaudit.duckdb"
    run_dbt(["seed"], wh)
    run_dbt(["build", "--select", "+int_prompts"], wh)
    queries = ["edu_001", "fin_001", "hea_001"]

    first = _rows("model-a", queries, skip_neutral="fin_001")
    _import(wh, tmp_path / "a.csv", first)
    _assert_same_as_full_refresh(wh, tmp_path, "first import")
    assert set(_state(wh).model) == set(INCREMENTAL)

    # verdicts on pairs already built: the pair tables take them in (a full rebuild)
    pair = read(
        wh,
        "select neutral_generation_id, disability_generation_id from main.int_pairs "
        "where pair_status = 'complete' order by pair_id limit 1",
    ).iloc[0]
    verdicts = tmp_path / "verdicts.jsonl"
    common = {"judge_name": "ext", "judge_model": "m"}
    verdicts.write_text(
        json.dumps(
            common
            | {"kind": "rubric", "generation_id": pair.disability_generation_id}
            | {"raw_output": json.dumps(RUBRIC)}
        )
        + "\n"
        + json.dumps(
            common
            | {"kind": "contrastive"}
            | pair[["neutral_generation_id", "disability_generation_id"]].to_dict()
            | {"raw_output": json.dumps(CONTRASTIVE)}
        )
    )
    assert import_judgments(verdicts, wh).inserted == 2
    _assert_same_as_full_refresh(wh, tmp_path, "verdicts imported")
    judged = read(wh, "select n_rubric_judges, n_contrastive_judges from main.pair_details")
    # a verdict attaches to every pair with the same texts (one at least)
    assert judged.n_rubric_judges.sum() >= 1 and judged.n_contrastive_judges.sum() >= 1

    # a second model, and the neutral answer model-a lacked: its fin_001 pairs become complete
    neutral = [r for r in _rows("model-a", queries) if r["query_id"] == "fin_001"][:1]
    second = _import(wh, tmp_path / "b.csv", _rows("model-b", queries[:2]) + neutral)
    before = read(wh, "select count(*) as n from main.int_pairs where pair_status = 'complete'").n[
        0
    ]
    _assert_same_as_full_refresh(wh, tmp_path, "second import")
    _assert_group_local_views(wh, tmp_path, "second import")
    after = read(wh, "select count(*) as n from main.int_pairs where pair_status = 'complete'").n[0]
    assert after > before

    capsys.readouterr()
    assert main(["forget", second, "--yes", "--no-build", "--warehouse", str(wh)]) == 0
    _assert_same_as_full_refresh(wh, tmp_path, "forget")
    assert read(wh, "select count(*) as n from main.int_pairs where model_id = 'model-b'").n[0] == 0

    corrected = [dict(r, response_text=r["response_text"] + " Corrected.") for r in first[:4]]
    _import(wh, tmp_path / "fix.csv", corrected, replace=True)
    _assert_same_as_full_refresh(wh, tmp_path, "--replace import")
    texts = read(wh, "select neutral_response_text from main.int_pair_texts").neutral_response_text
    assert texts.str.endswith("Corrected.").any()


def _compiled(model: str) -> str:
    """The query dbt ran for `model` in the last build (the dbt_env fixture's target path)."""
    folder = (
        "staging"
        if model.startswith("stg_")
        else "intermediate"
        if model.startswith("int_")
        else "marts"
    )
    path = Path(os.environ["DBT_TARGET_PATH"]) / "compiled" / "ableaudit" / "models" / folder
    return (path / f"{model}.sql").read_text()


def _built_with_model_a(tmp_path: Path) -> Path:
    """A warehouse with the prompts, model-a's answers to two queries, and its first build."""
    wh = tmp_path / "ableaudit.duckdb"
    run_dbt(["seed"], wh)
    run_dbt(["build", "--select", "+int_prompts"], wh)
    _import(wh, tmp_path / "a.csv", _rows("model-a", ["edu_001", "fin_001"]))
    run_dbt(["run"], wh)
    return wh


def test_only_new_landings_are_read_and_a_changed_var_rebuilds_what_reads_it(tmp_path):
    wh = _built_with_model_a(tmp_path)
    assert all("touched_units" not in _compiled(m) for m in INCREMENTAL[1:])  # the first: full

    run_dbt(["run"], wh)  # nothing new: no landing to read, no unit to pair again
    assert "landing_id in (null)" in _compiled("stg_raw__generations")
    assert all("touched_units" in _compiled(m) for m in INCREMENTAL[1:])

    new = _import(wh, tmp_path / "b.csv", _rows("model-b", ["edu_001"]))
    run_dbt(["run", "--vars", "{degradation_threshold: 0.5}"], wh)
    assert f"landing_id in ('{new}')" in _compiled("stg_raw__generations")
    assert "touched_units" in _compiled("int_pairs")
    assert "touched_units" not in _compiled("int_pair_scores")  # its settings changed: full
    assert "touched_units" not in _compiled("pair_details")  # its settings hold them too
    thresholds = read(
        wh,
        "select distinct threshold from main.int_pair_scores "
        "where degradation_rule = 'strict_relative'",  # the pair metrics have thresholds of their own
    ).threshold
    assert thresholds.tolist() == [0.5]


def test_a_build_fingerprints_again_only_the_models_it_wrote(tmp_path):
    wh = _built_with_model_a(tmp_path)
    _assert_recorded_fingerprints(wh, "first build")
    # a record of model-a that no hash gives: kept as it is by a build that writes model-b only
    con = duckdb.connect(str(wh))
    con.execute(
        "update dbt_state.group_fingerprints set hash_xor = xor(hash_xor, 1) where model_id = 'model-a'"
    )
    con.close()
    _import(wh, tmp_path / "b.csv", _rows("model-b", ["edu_001"]))
    run_dbt(["run"], wh)
    assert "touched_units" in _compiled("int_pairs")  # an incremental build
    for model, (built, hashed) in _fingerprints(wh).items():
        columns, groups = built
        assert (columns, groups["model-b"]) == (hashed[0], hashed[1]["model-b"]), model
        n, total, xor = hashed[1]["model-a"]
        assert groups["model-a"] == (n, total, xor ^ 1), f"{model}: model-a fingerprinted again"
    # a full rebuild fingerprints every model again
    run_dbt(["run", "--full-refresh"], wh)
    _assert_recorded_fingerprints(wh, "full refresh")


# marts built model by model (macro model_scope_plan), each with a count column to spoil
BY_MODEL = {
    "degradation": "n_pairs",
    "refusal_rates": "n_generations",
    "assistive_tech_mismatch_rates": "n_mentions",
    "data_quality": "n_rows",
}


def _counts(wh: Path, mart: str, model: str) -> set:
    column = BY_MODEL[mart]
    return set(read(wh, f"select {column} from main.{mart} where model_id = '{model}'")[column])


@pytest.mark.long
def test_marts_built_model_by_model_compute_again_the_models_whose_inputs_changed(tmp_path):
    wh = _built_with_model_a(tmp_path)
    assert all(_counts(wh, mart, "model-a") for mart in BY_MODEL)
    # rows of model-a that no computation gives: a build that adds model-b keeps them
    con = duckdb.connect(str(wh))
    for mart, column in BY_MODEL.items():
        con.execute(f"update main.{mart} set {column} = -1 where model_id = 'model-a'")
    con.close()
    _import(wh, tmp_path / "b.csv", _rows("model-b", ["edu_001"]))
    run_dbt(["run"], wh)
    for mart in BY_MODEL:
        assert "model_id in ('model-b')" in _compiled(mart), mart
        assert _counts(wh, mart, "model-a") == {-1}, mart
        assert _counts(wh, mart, "model-b") - {-1}, mart
    # a build with nothing new computes no model
    run_dbt(["run"], wh)
    assert all("where false" in _compiled(mart) for mart in BY_MODEL)
    # a text's score changed (no generation, pair or pair score of its model did): the marts
    # that read per-text scores compute the models with that text again
    con = duckdb.connect(str(wh))
    con.execute("update main.data_quality set n_rows = -1")
    con.execute(
        "update main.response_scores_vader set status = 'error' where text_hash = ("
        "select min(text_hash) from main.stg_raw__generations where model_id = 'model-a' "
        "and response_text like '%model-a%')"
    )
    con.close()
    run_dbt(["run", "--select", "data_quality"], wh)
    assert "model_id in ('model-a')" in _compiled("data_quality")
    assert -1 not in _counts(wh, "data_quality", "model-a")
    assert _counts(wh, "data_quality", "model-b") == {-1}
    # a changed var: int_pair_scores is rebuilt with other thresholds, every model changed
    run_dbt(["run", "--vars", "{degradation_threshold: 0.5}"], wh)
    assert set(
        read(
            wh,
            "select distinct threshold from main.degradation "
            "where degradation_rule = 'strict_relative'",
        ).threshold
    ) == {0.5}
    assert _counts(wh, "degradation", "model-a") != {-1}
    # a full refresh computes every model of every mart
    run_dbt(["run", "--full-refresh"], wh)
    assert all(-1 not in _counts(wh, mart, "model-a") for mart in BY_MODEL)
