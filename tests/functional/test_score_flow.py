"""Scoring outside dbt: `ableaudit score` lands the per-text scores, and the build takes them.

One warehouse is scored inside `dbt build` only; its twin is scored by the flow first
(three more answers landing after it, left for dbt). Both must hold the same score
tables row for row and the same degradation mart. A flow stopped midway keeps what it
landed, a re-run lands only the rest, and `ableaudit forget` removes a scoring landing.
"""

from __future__ import annotations

import random

import pandas as pd
import pytest

from ableaudit.cli.main import main
from ableaudit.dbt.runner import run_dbt
from ableaudit.scorers.registry import LONG_MODEL, registered
from ableaudit.scoring import texts
from ableaudit.warehouse import connect
from ableaudit.warehouse.forgetting import history
from tests.fixtures.warehouse import land, read, response, synthetic_generations

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.usefixtures("dbt_env")]

BUILD = [
    "build",
    "--select",
    "+degradation",
    "response_scores_vader",
    "response_scores_verbosity",
    "response_refusals",
    "response_scores_text",
]
SCORES = {
    "response_scores_vader": "text_hash, scorer_version, vader_compound, status",
    "response_scores_verbosity": "text_hash, scorer_version, word_count, status",
    "response_refusals": "text_hash, scorer_version, refusal_rule, is_refusal, status",
    LONG_MODEL: "text_hash, scorer, scorer_version, score, status",
}


def late_rows() -> list[dict]:
    rng = random.Random(5)
    rows = [r for r in synthetic_generations(seed=2) if r["condition"] == "disability"][:3]
    return [
        dict(
            r,
            generation_id=f"late-{i}",
            sample_index=1,
            status="ok",
            error_message=None,
            response_text=f"a later answer {i}: " + response(rng),
        )
        for i, r in enumerate(rows)
    ]


def fresh(path) -> str:
    connect(path).close()
    land(path, synthetic_generations(seed=2))
    return str(path)


@pytest.fixture(scope="module")
def twins(dbt_env, tmp_path_factory):
    base = tmp_path_factory.mktemp("twins")
    in_dbt = fresh(base / "in_dbt.duckdb")
    land(in_dbt, late_rows())
    run_dbt(["seed"], in_dbt)
    run_dbt(BUILD, in_dbt)

    flowed = fresh(base / "flowed.duckdb")
    code = main(["score", "--warehouse", flowed, "--workers", "2", "--batch-size", "32"])
    assert code == 0
    land(flowed, late_rows())
    run_dbt(["seed"], flowed)
    run_dbt(BUILD, flowed)
    return in_dbt, flowed


@pytest.mark.parametrize("model", sorted(SCORES))
def test_scores_landed_by_the_flow_equal_scores_computed_in_dbt(twins, model):
    in_dbt, flowed = twins
    query = f"select {SCORES[model]} from {model} order by text_hash"
    expected, got = read(in_dbt, query), read(flowed, query)
    assert len(expected) > 50
    pd.testing.assert_frame_equal(got, expected)  # bit for bit: exact float equality


def test_the_build_took_the_landed_scores_and_scored_only_the_later_texts(twins):
    _, flowed = twins
    scorers = texts.default_scorers()
    assert "regard" not in scorers and {"vader", "verbosity", "refusal", "readability"} <= set(
        scorers
    )
    for name in scorers:
        model = registered()[name].model
        merged = read(
            flowed,
            f"select m.scored_at, cast(s.scored_at as timestamptz) as landed_at from {model} m "
            f"left join raw.text_scores s on s.text_hash = m.text_hash and s.scorer = '{name}' "
            "and s.scorer_version = m.scorer_version"
            + (f" where m.scorer = '{name}'" if model == LONG_MODEL else ""),
        )
        taken = merged[merged.landed_at.notna()]
        assert (taken.scored_at == taken.landed_at).all(), model
        assert merged.landed_at.isna().sum() == 3, model  # the later answers, scored in dbt
    (landing,) = [h for h in history(flowed) if h["kind"] == "score"]
    assert landing["status"] == "landed" and landing["rows"]["text_scores"] == len(scorers) * (
        read(flowed, "select count(*) as n from response_scores_vader").n[0] - 3
    )


def test_the_degradation_mart_is_the_same_both_ways(twins):
    in_dbt, flowed = twins
    query = (
        "select task, model_id, arm, query_set, metric, slice, slice_value, n_pairs, n_degraded, "
        "n_excluded, degradation_pct from degradation order by all"
    )
    expected, got = read(in_dbt, query), read(flowed, query)
    assert set(expected.metric) >= {"vader", "verbosity"}
    pd.testing.assert_frame_equal(got, expected)


def test_a_stopped_run_keeps_its_groups_a_rerun_lands_the_rest_and_forget_undoes_one(
    tmp_path, monkeypatch, capsys
):
    from ableaudit.audit.prefect_server import temporary_server
    from ableaudit.scoring.flow import score

    wh = fresh(tmp_path / "stopped.duckdb")
    total = texts.pending_texts(wh, ["vader"]).count("vader")
    reads = []
    real = texts.read_batches

    def stop_at_the_third_group(*args, **kwargs):
        reads.append(1)
        if len(reads) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(texts, "read_batches", stop_at_the_third_group)
    with temporary_server(), pytest.raises(KeyboardInterrupt):
        score(warehouse=wh, scorers=["vader"], batch_size=16, workers=1, group_batches=1)
    # groups one and two were read; the first landed when the second had been submitted
    (stopped,) = history(wh)
    assert stopped["status"] == "interrupted" and stopped["rows"] == {"text_scores": 16}

    monkeypatch.setattr(texts, "read_batches", real)
    with temporary_server():
        rest = score(warehouse=wh, scorers=["vader"], batch_size=16, workers=2)
        assert rest["pending"] == {"vader": total - 16} and rest["landed"] == total - 16
        again = score(warehouse=wh, scorers=["vader"], batch_size=16, workers=2)
    assert again["landed"] == 0 and again["landing_id"] is None
    assert len(history(wh)) == 2

    assert main(["forget", stopped["landing_id"], "--yes", "--no-build", "--warehouse", wh]) == 0
    assert "16 rows of text_scores" in capsys.readouterr().out
    assert texts.pending_texts(wh, ["vader"]).count("vader") == 16
    assert read(wh, "select count(*) as n from raw.text_scores").n[0] == total - 16


REGARD = "text_hash, scorer_version, status, reason, n_tokens, max_tokens, regard, p_positive"


def test_regard_landed_by_the_flow_replaces_unavailable_rows_and_equals_dbt_scores(
    tmp_path, monkeypatch
):
    """Built first before the classifier was installed (every text 'unavailable'), then
    scored by the flow once it is there: the build takes every landed score, and each
    equals what a build with the classifier computes itself."""
    from tests.fixtures.warehouse import make_tiny_regard_classifier

    build = ["build", "--select", "+response_scores_regard"]
    model_dir = tmp_path / "regard"
    monkeypatch.setenv("ABLEAUDIT_REGARD_MODEL", str(model_dir))
    flowed = fresh(tmp_path / "flowed.duckdb")
    run_dbt(["seed"], flowed)
    run_dbt(build, flowed)
    statuses = read(flowed, "select distinct status from response_scores_regard").status
    assert statuses.tolist() == ["unavailable"]

    make_tiny_regard_classifier(model_dir)
    in_dbt = fresh(tmp_path / "in_dbt.duckdb")
    run_dbt(["seed"], in_dbt)
    run_dbt(build, in_dbt)
    assert main(["score", "--warehouse", flowed, "--scorer", "regard", "--workers", "1"]) == 0
    n_texts = read(in_dbt, "select count(*) as n from response_scores_regard").n[0]
    landed = read(flowed, "select count(*) as n from raw.text_scores where scorer = 'regard'")
    assert landed.n[0] == n_texts > 50  # the 'unavailable' texts, scored
    run_dbt(build, flowed)

    merged = read(
        flowed,
        "select m.scored_at, cast(s.scored_at as timestamptz) as landed_at "
        "from response_scores_regard m left join raw.text_scores s on s.text_hash = m.text_hash "
        "and s.scorer = 'regard' and s.scorer_version = m.scorer_version",
    )
    assert len(merged) == n_texts and (merged.scored_at == merged.landed_at).all()
    query = f"select {REGARD} from response_scores_regard order by text_hash"
    expected, got = read(in_dbt, query), read(flowed, query)
    assert set(got.status) <= {"ok", "truncated"}
    # another batching of the same texts pads them differently: equal to float32 precision
    pd.testing.assert_frame_equal(got, expected, check_exact=False, atol=1e-6, rtol=0)
