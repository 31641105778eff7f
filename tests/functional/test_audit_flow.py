"""The audit end to end on the real embedded model (SmolLM2-135M, llama.cpp, CPU)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ableaudit import PROJECT_ROOT
from ableaudit.audit.flow import audit as audit_flow
from tests.fixtures.from_scratch import assert_as_from_scratch, raw_copy
from tests.fixtures.independent import degradation_vader
from tests.fixtures.pair_metrics import assert_pair_cache_is_the_libraries
from tests.fixtures.warehouse import read as _read

CONFIG = PROJECT_ROOT / "tests" / "e2e_configs" / "tiny_llamacpp.yaml"  # with both judges
NO_JUDGES = PROJECT_ROOT / "tests" / "e2e_configs" / "tiny_nojudge.yaml"
N_JUDGED = 6 * 2  # CONFIG: 6 domains x (1 neutral + 1 disability), answered and judged
N_PLANNED = 6 * 3  # NO_JUDGES: 6 domains x (1 neutral + 2 disabilities)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> dict:
    wh = tmp_path_factory.mktemp("flow") / "ableaudit.duckdb"
    os.environ["ABLEAUDIT_REGARD_MODEL"] = str(wh.parent / "no-regard-model-here")
    summary = audit_flow(config=str(CONFIG), warehouse=str(wh))
    return {"summary": summary, "warehouse": wh}


def test_generations_landed_once_with_tokens_and_latency(audited):
    g = _read(audited["warehouse"], "select * from raw.generations")
    assert len(g) == N_JUDGED and g.generation_id.is_unique
    assert set(g.status) <= {"ok", "empty", "error"}
    ok = g[g.status == "ok"]
    assert len(ok) >= N_JUDGED - 2  # a real model answers
    assert (
        (ok.completion_tokens > 0).all()
        and (ok.prompt_tokens > 0).all()
        and (ok.latency_ms > 0).all()
    )
    assert set(g.domain) == {
        "education",
        "finance",
        "healthcare",
        "hospitality",
        "media",
        "technology",
    }
    assert set(g.disability_id.dropna()) == {"hearing"}
    assert (g.system_prompt == "You are a helpful assistant.").all()


def test_degradation_matches_an_independent_vader_computation(audited):
    g = _read(audited["warehouse"], "select * from raw.generations")
    expected = degradation_vader(g, threshold=0.05)
    got = _read(
        audited["warehouse"],
        "select model_id, arm, slice, slice_value, n_pairs, n_degraded, degradation_pct "
        "from degradation where metric = 'vader' and task = 'text'",
    )
    merged = expected.merge(
        got,
        on=["model_id", "arm", "slice", "slice_value"],
        suffixes=("_exp", "_got"),
        how="outer",
        indicator=True,
    )
    assert (merged._merge == "both").all(), merged[merged._merge != "both"]
    assert (merged.n_pairs_exp == merged.n_pairs_got).all()
    assert (merged.n_degraded_exp == merged.n_degraded_got).all()
    assert merged.degradation_pct_got.sub(merged.degradation_pct_exp).abs().max() < 1e-9


def test_the_pair_metrics_score_the_embedded_models_answers(audited):
    wh = audited["warehouse"]
    cache, pairs = assert_pair_cache_is_the_libraries(wh)
    assert len(pairs) >= 1 and set(cache.status) <= {"ok", "truncated"}
    rates = _read(
        wh,
        "select metric, n_pairs, n_excluded from degradation "
        "where slice = 'overall' and task = 'text'",
    ).set_index("metric")
    significance = set(_read(wh, "select distinct metric from significance").metric)
    excluded = _read(
        wh,
        "select distinct metric, exclusion_reason from int_pair_scores where not included "
        "and metric in ('cosine_similarity', 'rouge_l', 'bleu')",
    )
    # a similarity leaves out pairs with an answer cut off at the token cap, with the reason
    assert set(excluded.exclusion_reason) <= {"truncated_answer"}
    for metric in set(cache.scorer) | {"vader_masked_parity_strict", "vader_masked_parity_weak"}:
        n_pairs, n_excluded = rates.loc[metric, ["n_pairs", "n_excluded"]]
        assert n_pairs + n_excluded == N_JUDGED // 2, metric
        assert (metric in significance) == (n_pairs > 0), metric
    assert rates.loc["vader_masked_parity_strict", "n_pairs"] == N_JUDGED // 2


def test_regard_is_absent_with_a_status_not_faked(audited):
    d = _read(audited["warehouse"], "select * from degradation where metric = 'regard'")
    assert d.empty or (d.n_pairs == 0).all()
    scores = _read(
        audited["warehouse"], "select * from int_generation_scores where metric = 'regard'"
    )
    assert scores.score.isna().all() and (scores.score_status == "unavailable").all()


def test_both_judges_ran_and_no_unparseable_verdict_carries_a_value(audited):
    j = _read(audited["warehouse"], "select * from raw.judgments")
    kinds = j.groupby("judge_kind").size().to_dict()
    assert kinds.get("rubric", 0) > 0 and kinds.get("contrastive", 0) > 0
    assert set(j.call_status) <= {"ok", "error"}
    ok = j[j.call_status == "ok"]
    assert set(ok.parse_status) <= {"parsed", "repaired", "unparseable"}
    assert ok[ok.parse_status == "unparseable"].parsed_json.isna().all()
    assert (ok.raw_output.str.len() > 0).all()
    counts = audited["summary"]["judges"]["smollm2-judge"]
    assert counts["rubric"]["verdicts"] == kinds["rubric"] or counts["rubric"]["cached"] > 0


def test_published_copy_is_readable_without_project_code(audited):
    published = Path(audited["summary"]["published"])
    assert published.is_file() and published != audited["warehouse"]
    code = (
        f"import duckdb; c = duckdb.connect({str(published)!r}, read_only=True); "
        "print(c.execute(\"select count(*) from degradation where slice = 'overall'\").fetchone()[0])"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    assert int(out.stdout.strip()) > 0


def test_a_build_after_the_audit_is_skipped_and_its_tables_are_as_from_scratch(
    audited, tmp_path, capsys
):
    """The audit's build wrote the stamp of what it read (its run ended before it): the next
    `ableaudit build` keeps it all, and every relation equals a build from scratch."""
    from ableaudit.cli import main

    folder = tmp_path / "copy"
    shutil.copytree(audited["warehouse"].parent, folder)  # modification times kept
    wh = folder / audited["warehouse"].name
    capsys.readouterr()
    assert main(["build", "--warehouse", str(wh)]) == 0
    assert "Nothing changed since the build of" in capsys.readouterr().out
    fresh = raw_copy(wh, tmp_path / "fresh" / "ableaudit.duckdb")
    assert main(["build", "--warehouse", str(fresh)]) == 0
    assert_as_from_scratch(wh, fresh)


def test_rerun_generates_nothing_new(audited):
    summary = audit_flow(config=str(CONFIG), warehouse=str(audited["warehouse"]), build=False)
    assert summary["targets"] == {} or all(v["inserted"] == 0 for v in summary["targets"].values())
    g = _read(audited["warehouse"], "select count(*) as n from raw.generations")
    assert g.n[0] == N_JUDGED


def _cli(*args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "ableaudit"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
        **kw,
    )


@pytest.mark.long
def test_kill_and_resume(tmp_path):
    """SIGKILL mid-audit, then rerun: no duplicate, no regeneration of landed rows."""
    wh = tmp_path / "ableaudit.duckdb"
    # -v: the log's "N/18 landed" lines say when some answers, not all, have landed
    proc = _cli("audit", "-v", "--config", str(NO_JUDGES), "--warehouse", str(wh), "--no-build")
    lines = []
    deadline = time.monotonic() + 300
    try:
        for line in proc.stdout:
            lines.append(line)
            if (m := re.search(r"(\d+)/18 landed", line)) and int(m.group(1)) < 18:
                break
            assert time.monotonic() < deadline, "".join(lines[-30:])
        else:
            pytest.fail("the audit ended before it could be killed:\n" + "".join(lines[-30:]))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = _read(wh, "select generation_id, created_at, response_text from raw.generations")
    assert 0 < len(before) < N_PLANNED

    rerun = _cli("audit", "--config", str(NO_JUDGES), "--warehouse", str(wh), "--no-build")
    out, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, out[-3000:]
    after = _read(wh, "select generation_id, created_at, response_text from raw.generations")
    assert len(after) == N_PLANNED and after.generation_id.is_unique
    kept = before.merge(after, on="generation_id", suffixes=("_before", "_after"))
    assert len(kept) == len(before)
    assert (kept.created_at_before == kept.created_at_after).all()  # not regenerated
    assert (kept.response_text_before.fillna("") == kept.response_text_after.fillna("")).all()


def test_the_run_is_one_landing_stamped_on_its_rows(audited):
    run_id = audited["summary"]["run_id"]
    landings = _read(audited["warehouse"], f"select * from raw.landings where run_id = '{run_id}'")
    assert landings.kind.tolist() == ["audit"] and landings.status.tolist() == ["landed"]
    (landing_id,) = landings.landing_id
    for table in ("generations", "judgments"):  # a rerun lands nothing new: rows keep theirs
        stamped = _read(audited["warehouse"], f"select distinct landing_id from raw.{table}")
        assert stamped.landing_id.tolist() == [landing_id], table
    rows = json.loads(landings.rows_json[0])
    assert rows["generations"] == N_JUDGED and rows["runs"] == 1 and rows["judgments"] > 0
