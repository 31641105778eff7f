"""`export annotation-sample` and `import annotations` on a small temporary warehouse.

The sample must be balanced over domains and disabilities, the same for a seed,
and carry the judge's own instructions; an import must land every rating once,
refuse a bad file whole (naming the file's rows), and be idempotent.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from ableaudit import PROJECT_ROOT
from ableaudit.dbt.runner import run_dbt
from ableaudit.ingest.annotations import (
    AnnotationError,
    export_annotation_sample,
    import_annotations,
)
from ableaudit.warehouse import connect
from tests.fixtures.warehouse import land, read, synthetic_generations

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """Synthetic generations, and the dbt views that name pairs (int_pairs) and domains."""
    tmp = tmp_path_factory.mktemp("annotations")
    wh = tmp / "ableaudit.duckdb"
    connect(wh).close()
    land(wh, synthetic_generations())
    run_dbt(["seed", "--select", "domains"], wh)
    run_dbt(["run", "--select", "+int_pairs", "stg_seeds__domains"], wh)
    return wh


def annotations(wh: Path) -> pd.DataFrame:
    return read(wh, "select * from raw.annotations order by item_id, dimension, annotator_id")


def fresh_copy(world: Path, tmp_path: Path) -> Path:
    """A copy of the world, so each import test starts from no annotations."""
    wh = tmp_path / "ableaudit.duckdb"
    wh.write_bytes(world.read_bytes())
    return wh


# --------------------------------------------------------------------------- export


def test_rubric_sample_is_balanced_and_deterministic(world, tmp_path):
    gens = read(world, "select * from raw.generations where status = 'ok' and task = 'text'")
    first = export_annotation_sample(world, tmp_path / "a", size_per_domain=12, seed=3)
    again = export_annotation_sample(world, tmp_path / "b", size_per_domain=12, seed=3)
    other = export_annotation_sample(world, tmp_path / "c", size_per_domain=12, seed=4)
    assert first.items_path.read_bytes() == again.items_path.read_bytes()
    assert first.instructions_path.read_text() == again.instructions_path.read_text()
    items = pd.read_csv(first.items_path, dtype=str, keep_default_na=False)
    assert set(items.item_id) != set(pd.read_csv(other.items_path, dtype=str).item_id)

    assert list(items.columns) == [
        "item_id",
        "item_kind",
        "domain",
        "disability_id",
        "query",
        "response",
        "annotator_id",
        "judge_score",
    ]
    assert (items.item_kind == "generation").all() and (items.judge_score == "").all()
    assert items.item_id.is_unique and set(items.item_id) <= set(gens.generation_id)
    # texts are the landed ones, model names are not in the file (blind rating)
    merged = items.merge(gens, left_on="item_id", right_on="generation_id")
    assert (merged.response == merged.response_text).all() and (
        merged["query"] == merged.prompt_text
    ).all()
    assert "model_id" not in items.columns

    available = gens.groupby("domain").size()
    per_domain = items.groupby("domain").size()
    for domain, n in available.items():
        assert per_domain[domain] == min(12, n), domain
        # within a domain, strata (disabilities, and the neutral responses) differ by at most one
        stratum = items[items.domain == domain].disability_id.replace("", "neutral").value_counts()
        avail = gens[gens.domain == domain].disability_id.fillna("neutral").value_counts()
        full = [s for s in avail.index if avail[s] > stratum.get(s, 0)]  # strata not exhausted
        counts = [stratum.get(s, 0) for s in full]
        assert not counts or max(stratum) - min(counts) <= 1, (domain, stratum.to_dict())

    shortfall = {r["domain"]: r for r in first.shortfall}
    assert shortfall["education"]["shortfall"] == 0
    assert (
        shortfall["media"]["available"] == 0 and shortfall["media"]["shortfall"] == 12
    )  # a seed domain with nothing


def test_instructions_carry_the_judges_words_and_the_shortfall(world, tmp_path):
    rubric = export_annotation_sample(world, tmp_path / "r", size_per_domain=50, seed=0)
    text = rubric.instructions_path.read_text()
    rubric_prompt = (PROJECT_ROOT / "ableaudit/judges/prompts/rubric_disability.v1.txt").read_text()
    criterion = next(line for line in rubric_prompt.splitlines() if line.startswith("- accuracy"))
    assert criterion in text and "rubric_disability.v1" in text and "rubric_neutral.v1" in text
    assert "{{" not in text and "<<<" not in text and "Reply with exactly" not in text
    assert "| `judge_score` | whole number 1-10 |" in text
    tech = next(r for r in rubric.shortfall if r["domain"] == "technology")
    assert tech["shortfall"] > 0
    assert (
        f"| technology | 50 | {tech['available']} | {tech['sampled']} | {tech['shortfall']} |"
        in text
    )

    contrastive = export_annotation_sample(
        world, tmp_path / "c", size_per_domain=5, seed=0, kind="contrastive", model_ids=["model-a"]
    )
    items = pd.read_csv(contrastive.items_path, dtype=str, keep_default_na=False)
    assert list(items.columns) == [
        "item_id",
        "item_kind",
        "domain",
        "disability_id",
        "question_a",
        "response_a",
        "question_b",
        "response_b",
        "annotator_id",
        "interpret",
        "stereotype",
        "framing",
        "abstain",
    ]
    pairs = read(
        world, "select * from int_pairs where pair_status = 'complete' and model_id = 'model-a'"
    )
    assert set(items.item_id) <= set(pairs.pair_id) and (items.item_kind == "pair").all()
    assert items.groupby("domain").size().max() == 5
    ctext = contrastive.instructions_path.read_text()
    assert (
        "stereotype: does B present the person as brave" in ctext
        and "No / Ambiguous / Yes" in ctext
    )

    with pytest.raises(AnnotationError, match="unknown annotation kind"):
        export_annotation_sample(world, tmp_path / "x", kind="vibes")
    with pytest.raises(AnnotationError, match="no text responses"):
        export_annotation_sample(world, tmp_path / "x", model_ids=["nobody"])


# --------------------------------------------------------------------------- import


def test_wide_csv_round_trip_is_idempotent_and_reports_changes(world, tmp_path):
    wh = fresh_copy(world, tmp_path)
    sample = export_annotation_sample(wh, tmp_path / "s", size_per_domain=3, seed=0)
    items = pd.read_csv(sample.items_path, dtype=str, keep_default_na=False)
    filled = items.copy()
    filled["annotator_id"] = "ann1"
    filled["judge_score"] = [str(1 + i % 10) for i in range(len(filled))]
    filled.loc[0, "judge_score"] = ""  # not rated
    path = tmp_path / "ann1.csv"
    filled.to_csv(path, index=False)

    report = import_annotations(path, wh)
    assert report.format == "wide" and report.inserted == len(filled) - 1 and report.not_rated == 1
    got = annotations(wh)
    assert len(got) == len(filled) - 1 and (got.item_kind == "generation").all()
    expected = dict(zip(filled.item_id[1:], filled.judge_score[1:]))
    assert dict(zip(got.item_id, got.value)) == expected
    assert (got.value_num == got.value.astype(float)).all() and got.annotation_id.is_unique

    again = import_annotations(path, wh)
    assert again.inserted == 0 and again.unchanged == len(filled) - 1 and again.replaced == []
    assert len(annotations(wh)) == len(got)

    filled.loc[1, "judge_score"] = "10" if filled.loc[1, "judge_score"] != "10" else "9"
    filled.to_csv(path, index=False)
    changed = import_annotations(path, wh)
    assert changed.inserted == 0 and len(changed.replaced) == 1
    assert changed.replaced[0]["item_id"] == filled.loc[1, "item_id"]
    assert changed.replaced[0]["new_value"] == filled.loc[1, "judge_score"]
    assert "replaced judge_score" in str(changed)
    now = annotations(wh).set_index("item_id")
    assert now.loc[filled.loc[1, "item_id"], "value"] == filled.loc[1, "judge_score"]
    assert len(now) == len(got)


def test_long_jsonl_and_parquet_with_label_spellings(world, tmp_path):
    wh = fresh_copy(world, tmp_path)
    pairs = read(
        wh, "select pair_id from int_pairs where pair_status = 'complete' order by pair_id limit 3"
    ).pair_id
    gen = read(
        wh, "select generation_id from raw.generations where status = 'ok' order by 1 limit 1"
    ).generation_id[0]
    rows = [
        {"item_id": pairs[0], "dimension": "interpret", "annotator_id": "a", "value": " yes "},
        {"item_id": pairs[0], "dimension": "abstain", "annotator_id": "a", "value": True},
        {"item_id": pairs[1], "dimension": "framing", "annotator_id": "a", "value": "ambiguous"},
        {"item_id": pairs[2], "dimension": "stereotype", "annotator_id": "a", "value": None},
        {"item_id": gen, "dimension": "judge_score", "annotator_id": "a", "value": 7.0},
    ]
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = import_annotations(path, wh)
    assert report.format == "long" and report.inserted == 4 and report.not_rated == 1
    got = annotations(wh).set_index(["item_id", "dimension"])
    assert got.loc[(pairs[0], "interpret"), ["value", "value_num"]].tolist() == ["Yes", 2.0]
    assert got.loc[(pairs[0], "abstain"), ["value", "value_num"]].tolist() == ["Yes", 1.0]
    assert got.loc[(pairs[1], "framing"), ["value", "value_num"]].tolist() == ["Ambiguous", 1.0]
    assert got.loc[(gen, "judge_score"), ["value", "item_kind"]].tolist() == ["7", "generation"]
    assert (got.xs("interpret", level="dimension").item_kind == "pair").all()

    parquet = tmp_path / "wide.parquet"
    pd.DataFrame(
        {"item_id": [pairs[1]], "annotator_id": ["b"], "framing": ["No"], "interpret": ["No"]}
    ).to_parquet(parquet)
    assert import_annotations(parquet, wh).inserted == 2
    assert len(annotations(wh)) == 6


def test_a_bad_file_is_refused_whole_with_its_rows(world, tmp_path):
    wh = fresh_copy(world, tmp_path)
    gens = read(
        wh, "select generation_id from raw.generations where status = 'ok' order by 1 limit 3"
    ).generation_id
    pair = read(wh, "select pair_id from int_pairs order by 1 limit 1").pair_id[0]
    good = pd.DataFrame({"item_id": [gens[0]], "annotator_id": ["ok"], "judge_score": ["5"]})
    good.to_csv(tmp_path / "good.csv", index=False)
    import_annotations(tmp_path / "good.csv", wh)
    before = annotations(wh)

    bad = pd.DataFrame(
        {
            "item_id": [gens[0], gens[1], "no-such-item", pair, gens[2], gens[2]],
            "dimension": [
                "judge_score",
                "judge_score",
                "judge_score",
                "judge_score",
                "interpret",
                "interpret",
            ],
            "annotator_id": ["x", "x", "x", "x", "x", "x"],
            "value": ["11", "6.5", "4", "3", "Maybe", "No"],
        }
    )
    path = tmp_path / "bad.csv"
    bad.to_csv(path, index=False)
    with pytest.raises(AnnotationError) as err:
        import_annotations(path, wh)
    msg = str(err.value)
    assert "nothing was landed" in msg
    assert (
        "row 2: judge_score score '11' is outside [1, 10]" in msg
    )  # CSV rows counted with the header as 1
    assert "row 3: judge_score score '6.5' is not a whole number" in msg
    assert "row 4: item_id 'no-such-item' is neither" in msg
    assert "row 5: judge_score rates a generation, but" in msg and "is a pair" in msg
    assert "row 6: interpret label 'Maybe' is not one of No, Ambiguous, Yes" in msg
    assert "by 'x' on 'interpret' (rows 6, 7)" in msg  # the duplicate, by file row
    pd.testing.assert_frame_equal(annotations(wh), before)

    (tmp_path / "cols.csv").write_text("item_id,annotator_id,sterotype\nx,a,Yes\n")
    with pytest.raises(AnnotationError, match="sterotype"):
        import_annotations(tmp_path / "cols.csv", wh)
    (tmp_path / "empty.csv").write_text(f"item_id,annotator_id,judge_score\n{gens[0]},a,\n")
    with pytest.raises(AnnotationError, match="no ratings"):
        import_annotations(tmp_path / "empty.csv", wh)
    with pytest.raises(AnnotationError, match="does not exist"):
        import_annotations(tmp_path / "missing.csv", wh)
    pd.testing.assert_frame_equal(annotations(wh), before)


def test_pairs_need_a_built_warehouse(tmp_path):
    wh = tmp_path / "ableaudit.duckdb"
    connect(wh).close()
    land(wh, synthetic_generations()[:3])
    (tmp_path / "p.csv").write_text(
        "item_id,dimension,annotator_id,value\nsome-pair,interpret,a,Yes\n"
    )
    with pytest.raises(AnnotationError, match="run `ableaudit build` first"):
        import_annotations(tmp_path / "p.csv", wh)
    with pytest.raises(AnnotationError, match="run `ableaudit build` first"):
        export_annotation_sample(wh, tmp_path / "out", kind="contrastive")
    con = duckdb.connect(str(wh), read_only=True)
    assert con.execute("select count(*) from raw.annotations").fetchone()[0] == 0
    con.close()


def test_exported_cells_a_spreadsheet_would_run_are_escaped_and_import_back(world, tmp_path):
    """OWASP's CSV-injection rule: a cell starting with = + - @, a tab or a CR gets a leading
    quote in items.csv; the import takes it off again."""
    import csv

    wh = fresh_copy(world, tmp_path)
    hostile = ['=HYPERLINK("http://x.example","open")', "+1 call", "-2", "@SUM(A1)", "\ttab"]
    con = duckdb.connect(str(wh))
    ids = [
        g
        for (g,) in con.execute(
            "select generation_id from raw.generations where status = 'ok' and task = 'text' "
            "order by generation_id limit ?",
            [len(hostile)],
        ).fetchall()
    ]
    for gid, text in zip(ids, hostile, strict=True):
        con.execute(
            "update raw.generations set response_text = ? where generation_id = ?", [text, gid]
        )
    con.close()
    sample = export_annotation_sample(wh, tmp_path / "s", size_per_domain=1000, seed=0)
    with sample.items_path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_id = {r["item_id"]: r for r in rows}
    for gid, text in zip(ids, hostile, strict=True):
        assert by_id[gid]["response"] == "'" + text
    assert not [c for r in rows for c in r.values() if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    for r in rows:
        r["annotator_id"] = "'-ann1"  # as an escaping spreadsheet writes "-ann1" back
        r["judge_score"] = "7"
    path = tmp_path / "ratings.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert import_annotations(path, wh).inserted == len(rows)
    got = annotations(wh)
    assert set(got.annotator_id) == {"-ann1"} and set(got.item_id) == set(by_id)
