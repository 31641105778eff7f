"""The statistics marts, built by dbt on a temporary warehouse and checked
against scipy, statsmodels, sklearn and krippendorff called directly on the raw rows.

The world: four models (three with a size from raw.runs, one without), paired
prompts over four domains with a one-pair domain (n = 1) and a domain whose
verbosity difference is constant (zero variance); two rubric judges (with failed
and unparseable calls that must not count), one contrastive judge, and three
human annotators landed through `import_annotations` (missing ratings, ties,
disputed items, a dimension they all rate the same). Nothing here calls
ableaudit.stats: the expected numbers are computed in this file.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import duckdb
import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa
from statsmodels.stats.multitest import multipletests
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ableaudit.dbt.runner import run_dbt
from ableaudit.ingest.annotations import import_annotations
from ableaudit.warehouse import connect
from tests.fixtures.warehouse import DISABILITIES, generation_id, read

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]

SIZES = {"m-small": 1.0, "m-mid": 7.0, "m-large": 70.0}
MODELS = [*SIZES, "m-nosize"]
DOMAINS = ["education", "finance", "healthcare"]
QUERIES = [(f"{d[:3]}_{i:03d}", d) for d in DOMAINS for i in range(5)]
THRESHOLDS = [0.0, 0.01, 0.05, 0.10, 0.20]
LABELS = {
    "interpret": ["No", "Ambiguous", "Yes"],
    "stereotype": ["No", "Ambiguous", "Yes"],
    "framing": ["No", "Ambiguous", "Yes"],
    "abstain": ["No", "Yes"],
}
_VADER = SentimentIntensityAnalyzer()
_WORDS = [
    "plan",
    "ask",
    "the",
    "office",
    "for",
    "details",
    "and",
    "options",
    "you",
    "can",
    "apply",
    "today",
]
_TONE = ["great", "helpful", "excellent", "sorry", "unfortunately", "difficult", "support", "hard"]


def vader(text: str) -> float:
    return _VADER.polarity_scores(text)["compound"]


def words(text: str) -> int:
    return len(text.split())


def text(rng: random.Random, n: int) -> str:
    return " ".join(
        rng.choice(_TONE) if rng.random() < 0.25 else rng.choice(_WORDS) for _ in range(max(1, n))
    )


def gen_row(model, query_id, domain, disability, response, status="ok"):
    return dict(
        generation_id=generation_id(model, query_id, disability),
        run_id="run-2",
        task="text",
        target=model,
        model_id=model,
        backend="import",
        arm="baseline",
        query_set="ableaudit",
        query_id=query_id,
        domain=domain,
        disability_id=disability,
        condition="disability" if disability else "neutral",
        prompt_id=f"ableaudit:{query_id}:{disability or 'neutral'}",
        prompt_text=f"question {query_id} {disability}",
        temperature=0.1,
        sample_index=0,
        status=status,
        response_text=response if status == "ok" else None,
        source="imported",
    )


def synthetic_generations(seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for m_i, model in enumerate(MODELS):
        for query_id, domain in QUERIES:
            if model == "m-nosize" and domain != "education":
                continue
            n_words = rng.randint(10, 40)
            neutral = text(rng, n_words)
            rows.append(gen_row(model, query_id, domain, None, neutral))
            effect = (
                rng.randint(-6, 10) + 2 * m_i
            )  # a query-level shift: pairs of a query move together
            for disability in DISABILITIES:
                if model == "m-large" and domain == "finance":
                    answer = neutral + " and more"  # verbosity difference exactly +2: zero variance
                else:
                    answer = text(rng, n_words + effect + rng.randint(-2, 2))
                rows.append(gen_row(model, query_id, domain, disability, answer))
    # a one-pair domain for m-mid (n = 1), and a failed generation whose pair must not count
    rows.append(gen_row("m-mid", "tec_000", "technology", None, text(rng, 12)))
    rows.append(gen_row("m-mid", "tec_000", "technology", "vision", text(rng, 15)))
    rows.append(gen_row("m-mid", "tec_001", "technology", None, text(rng, 12)))
    rows.append(gen_row("m-mid", "tec_001", "technology", "hearing", None, status="error"))
    return rows


RUNS = [
    # an older run gave m-large another size: the latest run wins
    (
        "run-0",
        "2024-01-01 00:00:00",
        {"targets": [{"name": "m-large", "model_id": None, "params_b": 13.0}]},
    ),
    (
        "run-1",
        "2024-02-01 00:00:00",
        {
            "targets": [
                {"name": "small-target", "model_id": "m-small", "params_b": 1.0},
                {"name": "m-mid", "model_id": None, "params_b": 7.0},
            ]
        },
    ),
    (
        "run-2",
        "2024-03-01 00:00:00",
        {
            "targets": [
                {"name": "m-large", "params_b": 70.0},
                {"name": "m-nosize", "params_b": None},
            ]
        },
    ),
]


def judgment(jid, kind, judge, parsed, *, gid=None, nid=None, did=None, call="ok", parse="parsed"):
    return dict(
        judgment_id=jid,
        judge_kind=kind,
        judge_name=judge,
        judge_model=f"model-of-{judge}",
        judge_revision="r1",
        prompt_version=f"{'rubric_neutral' if kind == 'rubric' else 'contrastive'}.v1",
        generation_id=gid,
        neutral_generation_id=nid,
        disability_generation_id=did,
        subject_hash=jid,
        raw_output="...",
        call_status=call,
        parse_status=parse if call == "ok" else None,
        parsed_json=json.dumps(parsed) if parsed is not None else None,
        parse_notes=None,
        error_message="boom" if call == "error" else None,
        source="judged",
        run_id="run-2",
    )


def synthetic_judgments(gens: pd.DataFrame, seed: int = 3) -> list[dict]:
    """Rubric judges j1, j2 on m-small's generations; contrastive j1 on m-small's education pairs."""
    rng = random.Random(seed)
    rows = []
    small = gens[(gens.model_id == "m-small") & (gens.domain.isin(["education", "finance"]))]
    for i, g in enumerate(small.itertuples()):
        base = min(10, max(1, 2 + len(g.response_text.split()) // 6))
        rows.append(
            judgment(
                f"r1-{i}", "rubric", "j1", {"score": base, "declined": False}, gid=g.generation_id
            )
        )
        r = rng.random()
        if r < 0.08:
            continue  # j2 missed it
        if r < 0.14:
            rows.append(
                judgment(f"r2-{i}", "rubric", "j2", None, gid=g.generation_id, call="error")
            )
        elif r < 0.20:
            rows.append(
                judgment(f"r2-{i}", "rubric", "j2", None, gid=g.generation_id, parse="unparseable")
            )
        else:
            s2 = min(10, max(1, base + rng.choice([-1, 0, 0, 1, 2])))
            rows.append(
                judgment(
                    f"r2-{i}", "rubric", "j2", {"score": s2, "declined": False}, gid=g.generation_id
                )
            )
    neutral = gens[(gens.condition == "neutral")].set_index(["model_id", "query_id"]).generation_id
    pairs = gens[
        (gens.model_id == "m-small")
        & (gens.domain == "education")
        & (gens.condition == "disability")
    ]
    for i, p in enumerate(pairs.itertuples()):
        verdict = {k: rng.choice(v) for k, v in LABELS.items() if k != "abstain"}
        verdict["decline_in_response_a"] = False
        verdict["decline_in_response_b"] = rng.random() < 0.2
        rows.append(
            judgment(
                f"c1-{i}",
                "contrastive",
                "j1",
                verdict,
                nid=neutral[(p.model_id, p.query_id)],
                did=p.generation_id,
            )
        )
    return rows


def human_files(tmp: Path, gens: pd.DataFrame, pair_ids: list[str], seed: int = 5) -> list[Path]:
    """judge_score by h1-h3 (wide CSV; h3 misses some; a few wildly disputed items) and labels (long JSONL)."""
    rng = random.Random(seed)
    items = gens[(gens.model_id == "m-small") & (gens.domain == "education")].sort_values(
        "generation_id"
    )
    rows = []
    for i, g in enumerate(items.itertuples()):
        truth = min(10, max(1, 2 + len(g.response_text.split()) // 6))
        for h in ("h1", "h2", "h3"):
            if h == "h3" and i % 5 == 0:
                continue  # a missing rating
            score = min(10, max(1, truth + rng.choice([-1, 0, 0, 1])))
            if i % 11 == 0:
                score = {"h1": 1, "h2": 9, "h3": 5}[h]  # disputed: sd = 4
            rows.append({"item_id": g.generation_id, "annotator_id": h, "judge_score": str(score)})
    scores = tmp / "scores.csv"
    pd.DataFrame(rows).to_csv(scores, index=False)
    labels = []
    for i, pid in enumerate(sorted(pair_ids)[:30]):
        for h in ("h1", "h2"):
            for dim in ("interpret", "stereotype", "framing"):
                if h == "h2" and dim == "framing" and i % 4 == 0:
                    continue
                labels.append(
                    {
                        "item_id": pid,
                        "dimension": dim,
                        "annotator_id": h,
                        "value": rng.choice(["No", "No", "Ambiguous", "Yes"]),
                    }
                )
            labels.append(
                {"item_id": pid, "dimension": "abstain", "annotator_id": h, "value": "No"}
            )  # all alike
    label_file = tmp / "labels.jsonl"
    label_file.write_text("".join(json.dumps(r) + "\n" for r in labels))
    return [scores, label_file]


@pytest.fixture(scope="module")
def built(dbt_env, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("stats_marts")
    wh = tmp / "ableaudit.duckdb"
    gens = pd.DataFrame(synthetic_generations())
    con = connect(wh)
    try:
        con.register("gens", gens)
        con.execute("insert into raw.generations by name select * from gens")
        for run_id, started, cfg in RUNS:
            con.execute(
                "insert into raw.runs (run_id, config_json, started_at, status) values (?, ?, ?, 'ok')",
                [run_id, json.dumps(cfg), started],
            )
        con.register("judgments", pd.DataFrame(synthetic_judgments(gens)))
        con.execute("insert into raw.judgments by name select * from judgments")
    finally:
        con.close()
    run_dbt(["seed"], wh)
    run_dbt(["run", "--select", "+int_pairs"], wh)
    pair_ids = read(
        wh,
        "select p.pair_id from int_pairs p join raw.generations g "
        "on g.generation_id = p.disability_generation_id "
        "where g.model_id = 'm-small' and g.domain = 'education'",
    ).pair_id.tolist()
    for f in human_files(tmp, gens, pair_ids):
        import_annotations(f, wh)
    run_dbt(["build"], wh)
    return wh


# --------------------------------------------------------------------------- independent side


@pytest.fixture(scope="module")
def pairs(built) -> pd.DataFrame:
    """Included pairs x metric (vader, verbosity), built in pandas from raw.generations."""
    g = read(built, "select * from raw.generations")
    keys = ["model_id", "arm", "query_set", "query_id", "temperature", "sample_index"]
    n = g[g.condition == "neutral"][keys + ["status", "response_text"]]
    d = g[g.condition == "disability"][
        keys + ["domain", "disability_id", "status", "response_text"]
    ]
    p = d.merge(n, on=keys, suffixes=("_d", "_n"))
    p = p[(p.status_d == "ok") & (p.status_n == "ok")]
    out = []
    for metric, fn, direction in (
        ("vader", vader, "higher_is_better"),
        ("verbosity", words, "lower_is_better"),
    ):
        out.append(
            p.assign(
                metric=metric,
                direction=direction,
                neutral=p.response_text_n.map(fn).astype(float),
                disability=p.response_text_d.map(fn).astype(float),
            )
        )
    return pd.concat(out, ignore_index=True)


def slices(p: pd.DataFrame):
    yield "overall", "all", p
    for col, name in (("domain", "domain"), ("disability_id", "disability")):
        for value, g in p.groupby(col):
            yield name, value, g


def close(got, expected, what, rtol=1e-9, atol=1e-12):
    np.testing.assert_allclose(
        np.asarray(got, dtype=float),
        np.asarray(expected, dtype=float),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
        err_msg=what,
    )


def cluster_ci(diffs, clusters, reps=20000, seed=123):
    """Percentile CI of the pair mean, resampling whole clusters (independent of the package)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"d": diffs, "c": clusters})
    sums = frame.groupby("c").d.sum().to_numpy()
    counts = frame.groupby("c").d.size().to_numpy()
    idx = rng.integers(0, len(sums), size=(reps, len(sums)))
    boot = sums[idx].sum(1) / counts[idx].sum(1)
    return np.quantile(boot, [0.025, 0.975])


# --------------------------------------------------------------------------- significance


def test_significance_equals_scipy_statsmodels(built, pairs):
    mart = read(built, "select * from significance where metric in ('vader', 'verbosity')")
    assert set(mart.slice) == {"overall", "domain", "disability"}
    expected = []
    for (model, metric), p in pairs.groupby(["model_id", "metric"]):
        for slice_name, value, g in slices(p):
            n, d = g.neutral.to_numpy(), g.disability.to_numpy()
            diff = d - n
            row = dict(
                model_id=model,
                metric=metric,
                slice=slice_name,
                slice_value=value,
                n_pairs=len(g),
                n_clusters=g.query_id.nunique(),
                mean_neutral=n.mean(),
                mean_disability=d.mean(),
                mean_diff=diff.mean(),
                paper_t_p=np.nan,
                paper_anova_p=np.nan,
                pair_wilcoxon_p=np.nan,
                cohen_dz=np.nan,
                cohen_d_pooled=np.nan,
                paper_t_stat=np.nan,
                paper_anova_f=np.nan,
                pair_wilcoxon_method=None,
                query_t_p=np.nan,
            )
            query_means = pd.Series(diff).groupby(g.query_id.to_numpy()).mean().to_numpy()
            if len(query_means) >= 2 and np.ptp(query_means) > 1e-9:
                row["query_t_p"] = stats.ttest_1samp(query_means, 0.0).pvalue
            if len(g) >= 2:
                if np.ptp(diff) > 1e-9:
                    t = stats.ttest_rel(d, n)
                    row.update(
                        paper_t_stat=t.statistic,
                        paper_t_p=t.pvalue,
                        cohen_dz=diff.mean() / diff.std(ddof=1),
                    )
                if np.ptp(n) > 0 or np.ptp(d) > 0:
                    if np.isclose(n.mean(), d.mean(), rtol=0, atol=1e-12):
                        # equal means, some spread: F = 0 and p = 1 exactly (scipy gives +-1e-32 and ~1 or NaN)
                        row.update(paper_anova_f=0.0, paper_anova_p=1.0, cohen_d_pooled=0.0)
                    else:
                        f = stats.f_oneway(n, d)
                        row.update(
                            paper_anova_f=f.statistic,
                            paper_anova_p=f.pvalue,
                            cohen_d_pooled=(d.mean() - n.mean())
                            / np.sqrt((n.var(ddof=1) + d.var(ddof=1)) / 2),
                        )
                if np.any(diff != 0):
                    row["pair_wilcoxon_p"] = stats.wilcoxon(diff).pvalue
                    zeros_or_ties = (diff == 0).any() or len(np.unique(np.abs(diff[diff != 0]))) < (
                        diff != 0
                    ).sum()
                    row["pair_wilcoxon_method"] = (
                        "exact"
                        if not zeros_or_ties and len(diff) <= 50
                        else "exact_permutation"
                        if zeros_or_ties and len(diff) <= 13
                        else "normal_approx"
                    )
            expected.append(row)
    expected = pd.DataFrame(expected)
    for _key, e in expected.groupby(["model_id", "metric"]):
        ok = e.query_t_p.notna()
        expected.loc[e.index[ok], "p_holm"] = multipletests(e.query_t_p[ok], method="holm")[1]
        expected.loc[e.index[ok], "p_bh"] = multipletests(e.query_t_p[ok], method="fdr_bh")[1]
    key = ["model_id", "metric", "slice", "slice_value"]
    merged = expected.merge(mart, on=key, how="outer", suffixes=("_exp", ""), indicator=True)
    assert (merged._merge == "both").all(), merged[merged._merge != "both"][key + ["_merge"]]
    assert (merged.n_pairs_exp == merged.n_pairs).all() and (
        merged.n_clusters_exp == merged.n_clusters
    ).all()
    for col in (
        "mean_neutral",
        "mean_disability",
        "mean_diff",
        "paper_t_stat",
        "paper_t_p",
        "paper_anova_f",
        "paper_anova_p",
        "cohen_dz",
        "cohen_d_pooled",
        "pair_wilcoxon_p",
        "query_t_p",
        "p_holm",
        "p_bh",
    ):
        close(merged[col], merged[f"{col}_exp"], col)
    # significant: Holm p of the query-level test below 0.05 and an interval that excludes 0
    outside = (merged.ci_low > 0) | (merged.ci_high < 0)
    assert (merged.significant == ((merged.p_holm < 0.05) & outside)).all()
    # the smallest detectable shift has 80 % power by scipy's noncentral t
    tested = merged[merged.min_detectable_diff.notna()]
    assert len(tested) > 30
    for r in tested.itertuples():
        g = pairs[(pairs.model_id == r.model_id) & (pairs.metric == r.metric)]
        if r.slice != "overall":
            g = g[g[{"domain": "domain", "disability": "disability_id"}[r.slice]] == r.slice_value]
        means = (g.disability - g.neutral).groupby(g.query_id).mean()
        df, nc = len(means) - 1, r.min_detectable_diff / means.std(ddof=1) * np.sqrt(len(means))
        crit = stats.t.ppf(0.975, df)
        assert stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc) == pytest.approx(
            0.8, abs=1e-4
        )
    assert (
        merged.direction
        == np.where(merged.metric == "vader", "higher_is_better", "lower_is_better")
    ).all()
    assert (
        merged.pair_wilcoxon_method.fillna("-") == merged.pair_wilcoxon_method_exp.fillna("-")
    ).all()
    assert (mart.task == "text").all() and (mart.query_set == "ableaudit").all()
    # the data are not degenerate: many p-values, some small
    assert (
        merged.paper_t_p.notna().sum() > 50
        and (merged.paper_t_p < 0.05).any()
        and (merged.paper_t_p > 0.05).any()
    )


def test_significance_degenerate_groups_are_null_with_a_reason(built):
    mart = read(built, "select * from significance").set_index(
        ["model_id", "metric", "slice", "slice_value"]
    )
    one = mart.loc[("m-mid", "verbosity", "domain", "technology")]
    assert one.n_pairs == 1
    for col in (
        "paper_t_p",
        "paper_anova_p",
        "pair_wilcoxon_p",
        "cohen_dz",
        "cohen_d_pooled",
        "ci_low",
        "ci_high",
        "p_holm",
    ):
        assert np.isnan(one[col]), col
    assert "paper_t_test: n<2" in one.reason and "bootstrap_ci" in one.reason

    flat = mart.loc[("m-large", "verbosity", "domain", "finance")]
    assert flat.n_pairs == 45 and flat.mean_diff == 2.0 and flat.sd_diff == 0.0
    assert np.isnan(flat.paper_t_p) and np.isnan(flat.cohen_dz) and np.isnan(flat.p_bh)
    assert "paper_t_test: zero variance of differences" in flat.reason
    assert not np.isnan(flat.paper_anova_p) and not np.isnan(
        flat.pair_wilcoxon_p
    )  # the groups themselves vary
    assert flat.ci_low == flat.ci_high == 2.0
    complete = mart[mart.reason.isna()]
    assert (
        len(complete)
        and complete[["paper_t_p", "paper_anova_p", "pair_wilcoxon_p", "ci_low"]]
        .notna()
        .all()
        .all()
    )
    # the failed generation's pair is not counted
    assert mart.loc[("m-mid", "vader", "disability", "hearing")].n_pairs == 15


def test_significance_ci_resamples_whole_queries(built, pairs):
    mart = read(
        built,
        "select * from significance where metric in ('vader', 'verbosity') and n_clusters >= 5",
    )
    assert len(mart) > 40
    checked = 0
    for row in mart.itertuples():
        p = pairs[(pairs.model_id == row.model_id) & (pairs.metric == row.metric)]
        g = next(g for s, v, g in slices(p) if (s, v) == (row.slice, row.slice_value))
        diff = (g.disability - g.neutral).to_numpy()
        low, high = cluster_ci(diff, g.query_id.to_numpy())
        width = max(high - low, 1e-12)
        assert abs(row.ci_low - low) < 0.12 * width and abs(row.ci_high - high) < 0.12 * width, row
        assert row.ci_low <= row.mean_diff <= row.ci_high
        checked += 1
    assert checked == len(mart)
    # queries shift their pairs together: resampling single pairs would give a much narrower CI
    row = mart[
        (mart.model_id == "m-small") & (mart.metric == "verbosity") & (mart.slice == "overall")
    ].iloc[0]
    g = pairs[(pairs.model_id == "m-small") & (pairs.metric == "verbosity")]
    diff = (g.disability - g.neutral).to_numpy()
    pair_low, pair_high = cluster_ci(diff, np.arange(len(diff)))
    assert (row.ci_high - row.ci_low) > 1.5 * (pair_high - pair_low)


@pytest.mark.long
def test_bootstrap_vars_and_thresholds_vars(built, tmp_path):
    wh = tmp_path / "ableaudit.duckdb"
    shutil.copy(built, wh)
    before = read(wh, "select * from significance order by all")
    disputed = read(wh, "select * from disputed_items")
    run_dbt(
        [
            "run",
            "--select",
            "significance",
            "int_pair_thresholds",
            "threshold_sensitivity",
            "disputed_items",
            "--vars",
            "{bootstrap_seed: 1, sensitivity_thresholds: [0.3, 0.05], disputed_sd_threshold: 0.5}",
        ],
        wh,
    )
    looser = read(wh, "select * from disputed_items")
    assert (
        (looser.sd_threshold == 0.5).all()
        and (looser.sd > 0.5).all()
        and len(looser) > len(disputed)
    )
    after = read(wh, "select * from significance order by all")
    close(after.query_t_p, before.query_t_p, "query_t_p does not depend on the bootstrap seed")
    moved = (after.ci_low != before.ci_low) & before.ci_low.notna()
    assert moved.any()
    assert sorted(read(wh, "select distinct threshold from threshold_sensitivity").threshold) == [
        0.05,
        0.3,
    ]
    run_dbt(["run", "--select", "significance"], wh)  # back to seed 0: the same numbers again
    pd.testing.assert_frame_equal(read(wh, "select * from significance order by all"), before)


def _one_more_model_keeps_the_others_rows(built, tmp_path, mart, keys, mark, column):
    """Build ``mart`` without m-large's answers, mark a row of another model (``column`` set
    to -999 where ``mark``), land m-large's answers and build again: the marked row is kept
    (only a reused row keeps it), and the rest equals the full build. Returns the warehouse,
    the query of the mart in ``keys`` order and the full build's rows."""
    wh = tmp_path / "ableaudit.duckdb"
    shutil.copy(built, wh)
    order = f"select * from {mart} order by {', '.join(keys)}"
    full = read(wh, order)
    con = duckdb.connect(str(wh))
    con.execute("create table main.later as from raw.generations where model_id = 'm-large'")
    con.execute("delete from raw.generations where model_id = 'm-large'")
    con.close()
    run_dbt(["run", "--select", f"+{mart}"], wh)  # the pairs are tables
    con = duckdb.connect(str(wh))
    assert con.execute(f"select count(*) from {mart} where {mark}").fetchone()[0] >= 1
    assert not con.execute(f"select count(*) from {mart} where model_id = 'm-large'").fetchone()[0]
    con.execute(f"update {mart} set {column} = -999 where {mark}")
    con.execute("insert into raw.generations from main.later")
    con.execute("drop table main.later")
    con.close()

    run_dbt(["run", "--select", f"+{mart}"], wh)
    after = read(wh, order)
    marked = duckdb.sql(f"select ({mark}) as m from after").df().m.to_numpy()
    assert marked.any() and (after.loc[marked, column] == -999).all()
    after.loc[marked, column] = full.loc[marked, column].to_numpy()
    pd.testing.assert_frame_equal(after, full)  # m-large computed now equals the full build
    return wh, order, full


def _assert_same_but_fingerprints(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Equal rows; the fingerprints differ, as they digest the mart's code as dbt compiled it,
    where the var stats_reuse is written out (the next build with reuse computes every group
    once more)."""
    assert (got.inputs_fingerprint != want.inputs_fingerprint).all()
    pd.testing.assert_frame_equal(
        got.drop(columns="inputs_fingerprint"), want.drop(columns="inputs_fingerprint")
    )


@pytest.mark.long
def test_significance_after_one_more_model_keeps_the_others_rows_and_equals_a_full_build(
    built, tmp_path
):
    mark = "model_id = 'm-small' and metric = 'vader' and slice = 'overall'"
    keys = ["task", "model_id", "arm", "query_set", "metric", "slice", "slice_value"]
    wh, order, full = _one_more_model_keeps_the_others_rows(
        built, tmp_path, "significance", keys, mark, "mean_diff"
    )
    run_dbt(["run", "--select", "significance", "--vars", "{stats_reuse: false}"], wh)
    _assert_same_but_fingerprints(read(wh, order), full)


@pytest.mark.long
def test_heterogeneity_after_one_more_model_keeps_the_others_rows_and_equals_a_full_build(
    built, tmp_path
):
    mark = "model_id = 'm-small' and metric = 'vader' and factor = 'disability'"
    keys = ["task", "model_id", "arm", "query_set", "metric", "factor"]
    wh, order, full = _one_more_model_keeps_the_others_rows(
        built, tmp_path, "heterogeneity", keys, mark, "k_levels"
    )
    run_dbt(["run", "--select", "heterogeneity", "--vars", "{stats_reuse: false}"], wh)
    _assert_same_but_fingerprints(read(wh, order), full)


@pytest.mark.long
def test_threshold_sensitivity_counts_again_only_the_models_whose_pair_scores_changed(
    built, tmp_path
):
    mark = "model_id = 'm-small' and metric = 'vader' and threshold = 0.05"
    keys = ["task", "model_id", "arm", "query_set", "metric", "threshold"]
    wh, order, full = _one_more_model_keeps_the_others_rows(
        built, tmp_path, "threshold_sensitivity", keys, mark, "n_pairs"
    )
    assert full.inputs_fingerprint.notna().all()

    # other thresholds: int_pair_thresholds is defined anew, every model is counted again
    run_dbt(
        [
            "run",
            "--select",
            "int_pair_thresholds",
            "threshold_sensitivity",
            "--vars",
            "{sensitivity_thresholds: [0.05]}",
        ],
        wh,
    )
    narrowed = read(wh, order)
    assert (narrowed.threshold == 0.05).all() and (narrowed.n_pairs >= 0).all()
    run_dbt(["run", "--select", "int_pair_thresholds", "threshold_sensitivity"], wh)
    pd.testing.assert_frame_equal(read(wh, order), full)
    run_dbt(["run", "--select", "threshold_sensitivity", "--vars", "{stats_reuse: false}"], wh)
    _assert_same_but_fingerprints(read(wh, order), full)


# --------------------------------------------------------------------------- thresholds, models, sizes


def degraded(n, d, direction, thr):
    gap = (n - d) if direction == "higher_is_better" else (d - n)
    return (gap > 0) & (gap >= thr * np.abs(n) - 1e-9)


def improved(n, d, direction, thr):
    gap = (d - n) if direction == "higher_is_better" else (n - d)
    return (gap > 0) & (gap >= thr * np.abs(n) - 1e-9)


def test_threshold_sensitivity_equals_binomtest(built, pairs):
    mart = read(built, "select * from threshold_sensitivity where metric in ('vader', 'verbosity')")
    assert sorted(mart.threshold.unique()) == THRESHOLDS
    rows = []
    for (model, metric), p in pairs.groupby(["model_id", "metric"]):
        direction = p.direction.iloc[0]
        for thr in THRESHOLDS:
            k = int(degraded(p.neutral, p.disability, direction, thr).sum())
            m = int(improved(p.neutral, p.disability, direction, thr).sum())
            rows.append(
                dict(
                    model_id=model,
                    metric=metric,
                    threshold=thr,
                    n_pairs=len(p),
                    n_degraded=k,
                    n_improved=m,
                    degradation_pct=100 * k / len(p),
                    sign_test_p=stats.binomtest(k, k + m, 0.5, alternative="greater").pvalue
                    if k + m
                    else np.nan,
                )
            )
    expected = pd.DataFrame(rows)
    merged = expected.merge(
        mart,
        on=["model_id", "metric", "threshold"],
        suffixes=("_exp", ""),
        how="outer",
        indicator=True,
    )
    assert (merged._merge == "both").all()
    for col in ("n_pairs", "n_degraded", "n_improved"):
        assert (merged[col] == merged[f"{col}_exp"]).all(), col
    close(merged.degradation_pct, merged.degradation_pct_exp, "degradation_pct")
    close(merged.sign_test_p, merged.sign_test_p_exp, "sign_test_p")
    # at the build's threshold the rate is the degradation mart's
    deg = read(
        built,
        "select model_id, metric, degradation_pct from degradation where slice = 'overall' "
        "and metric in ('vader', 'verbosity')",
    )
    at = mart[mart.threshold == 0.05].merge(deg, on=["model_id", "metric"], suffixes=("", "_deg"))
    close(at.degradation_pct, at.degradation_pct_deg, "same rate as degradation")
    by_threshold = mart.sort_values("threshold").groupby(["model_id", "metric"]).n_degraded
    assert by_threshold.apply(lambda s: s.is_monotonic_decreasing).all()
    assert (mart.degradation_rule == "strict_relative").all()
    # Regard unavailable: no usable pair, but a row per model and threshold, as in degradation
    regard = read(built, "select * from threshold_sensitivity where metric = 'regard'")
    deg_regard = read(
        built, "select * from degradation where metric = 'regard' and slice = 'overall'"
    )
    assert len(deg_regard) == 4 and len(regard) == 4 * len(THRESHOLDS)
    assert (
        (regard.n_pairs == 0).all()
        and regard.degradation_pct.isna().all()
        and regard.sign_test_p.isna().all()
    )
    assert regard.reason.str.contains("degradation_pct: n=0").all()


def test_model_comparison_equals_f_oneway(built, pairs):
    mart = read(built, "select * from model_comparison").set_index("metric")
    for metric, p in pairs.groupby("metric"):
        groups = {m: (g.disability - g.neutral).to_numpy() for m, g in p.groupby("model_id")}
        f = stats.f_oneway(*groups.values())
        row = mart.loc[metric]
        assert row.k_models == 4 and row.n_pairs == len(p)
        assert json.loads(row.n_per_model) == {m: len(v) for m, v in groups.items()}
        close([row.anova_f, row.anova_p], [f.statistic, f.pvalue], metric)
        close(
            list(json.loads(row.mean_diff_per_model).values()),
            [v.mean() for v in groups.values()],
            metric,
        )
    judge = mart[mart.index.str.startswith("judge_score:")]
    assert len(judge) == 2  # j1 and j2 scored one model only: nothing to compare
    assert (judge.k_models == 1).all() and judge.anova_p.isna().all()
    assert judge.reason.str.contains("fewer than 2 models").all()


def test_scaling_equals_spearman_on_sizes(built, pairs):
    sizes = read(built, "select * from int_model_sizes").set_index("model_id")
    assert sizes.params_b.to_dict() == SIZES  # the latest run wins; a null params_b is no size
    assert (
        sizes.loc["m-small", "size_source"] == "config"
        and sizes.loc["m-small", "run_id"] == "run-1"
    )
    mart = read(built, "select * from scaling").set_index("metric")
    for metric, p in pairs.groupby("metric"):
        direction = p.direction.iloc[0]
        rates = (
            p.assign(deg=degraded(p.neutral, p.disability, direction, 0.05))
            .groupby("model_id")
            .deg.mean()
            * 100
        )
        known = [m for m in rates.index if m in SIZES]
        x, y = np.array([SIZES[m] for m in known]), rates[known].to_numpy()
        rho = stats.spearmanr(x, y)
        # three models: the exact permutation p over all 3! orderings (scipy enumerates them)
        exact = stats.permutation_test(
            (x,),
            lambda a, y=y: stats.spearmanr(a, y).statistic,
            permutation_type="pairings",
            n_resamples=np.inf,
        )
        row = mart.loc[metric]
        assert row.n_models == 3 and row.n_models_without_size == 1 and row.threshold == 0.05
        assert (
            row.spearman_method == "exact_permutation" and row.degradation_rule == "strict_relative"
        )
        close([row.spearman_rho, row.spearman_p], [rho.statistic, exact.pvalue], metric)
        assert row.spearman_p >= 1 / 3 - 1e-12
        points = json.loads(row.models_json)
        assert [pt["model_id"] for pt in points] == ["m-small", "m-mid", "m-large"]
        close(
            [pt["degradation_pct"] for pt in points], rates[["m-small", "m-mid", "m-large"]], metric
        )
    regard = mart.loc["regard"]  # Regard unavailable: no rates, no trend, and a reason
    assert (
        regard.n_models == 0
        and np.isnan(regard.spearman_rho)
        and "fewer than 3 models" in regard.reason
    )


# --------------------------------------------------------------------------- agreement


@pytest.fixture(scope="module")
def ratings(built) -> pd.DataFrame:
    """Every usable rating, from the raw rows: judge verdicts parsed here, human annotations as landed."""
    j = read(
        built,
        "select * from raw.judgments where call_status = 'ok' and parse_status in ('parsed', 'repaired')",
    )
    pair_of = (
        read(built, "select pair_id, disability_generation_id from int_pairs")
        .set_index("disability_generation_id")
        .pair_id
    )
    rows = []
    for r in j.itertuples():
        v = json.loads(r.parsed_json)
        if r.judge_kind == "rubric":
            rows.append(
                (r.generation_id, "judge_score", f"judge:{r.judge_name}", "judge", str(v["score"]))
            )
        else:
            item = pair_of[r.disability_generation_id]
            for dim in ("interpret", "stereotype", "framing"):
                rows.append((item, dim, f"judge:{r.judge_name}", "judge", v[dim]))
            rows.append(
                (
                    item,
                    "abstain",
                    f"judge:{r.judge_name}",
                    "judge",
                    "Yes" if v["decline_in_response_b"] else "No",
                )
            )
    a = read(built, "select * from raw.annotations")
    rows += [
        (r.item_id, r.dimension, f"human:{r.annotator_id}", "human", r.value)
        for r in a.itertuples()
    ]
    return pd.DataFrame(rows, columns=["item_id", "dimension", "rater_id", "rater_kind", "value"])


def codes(dim: str, values: pd.Series) -> np.ndarray:
    if dim == "judge_score":
        return values.astype(float).to_numpy()
    return values.map({v: i for i, v in enumerate(LABELS[dim])}).astype(float).to_numpy()


def test_int_ratings_holds_exactly_the_usable_ratings(built, ratings):
    got = read(built, "select item_id, dimension, rater_id, rater_kind, value from int_ratings")
    key = ["item_id", "dimension", "rater_id"]
    pd.testing.assert_frame_equal(
        got.sort_values(key).reset_index(drop=True),
        ratings.sort_values(key).reset_index(drop=True)[got.columns.tolist()],
        check_dtype=False,
    )
    assert set(got.rater_id) == {"judge:j1", "judge:j2", "human:h1", "human:h2", "human:h3"}


def test_agreement_equals_sklearn_and_scipy(built, ratings):
    mart = read(built, "select * from agreement").set_index(["dimension", "rater_a", "rater_b"])
    wide = {
        dim: g.pivot(index="item_id", columns="rater_id", values="value")
        for dim, g in ratings.groupby("dimension")
    }
    checked = 0
    for (dim, a, b), row in mart.iterrows():
        both = wide[dim][[a, b]].dropna()
        x, y = codes(dim, both[a]).astype(int), codes(dim, both[b]).astype(int)
        labels = list(range(1, 11)) if dim == "judge_score" else list(range(len(LABELS[dim])))
        assert row.n_items == len(both)
        close(row.accuracy, np.mean(x == y), f"{dim} {a} {b} accuracy")
        if np.ptp(x) > 0 and np.ptp(y) > 0:
            rho = stats.spearmanr(x, y)
            close(
                [row.spearman_rho, row.spearman_p],
                [rho.statistic, rho.pvalue],
                f"{dim} {a} {b} spearman",
            )
        else:
            assert np.isnan(row.spearman_rho) and "constant ratings" in row.reason
        if len(set(x) | set(y)) > 1:
            close(
                [row.cohen_kappa, row.kappa_linear, row.kappa_quadratic],
                [
                    cohen_kappa_score(x, y, labels=labels),
                    cohen_kappa_score(x, y, labels=labels, weights="linear"),
                    cohen_kappa_score(x, y, labels=labels, weights="quadratic"),
                ],
                f"{dim} {a} {b} kappa",
            )
        else:
            assert np.isnan(row.cohen_kappa) and "one category only" in row.reason
        checked += 1
    pairs_of_kinds = set(mart.kind_pair)
    assert {"human_vs_human", "human_vs_judge", "judge_vs_judge"} <= pairs_of_kinds
    assert checked >= 15
    # j2's failed and unparseable calls are not ratings: fewer items than j1
    assert (
        mart.loc[("judge_score", "judge:j1", "judge:j2")].n_items
        < (ratings.rater_id == "judge:j1").sum()
    )
    hh = mart.loc[("abstain", "human:h1", "human:h2")]  # both always 'No'
    assert (
        hh.n_items == 30
        and hh.accuracy == 1.0
        and np.isnan(hh.cohen_kappa)
        and np.isnan(hh.spearman_rho)
    )


def test_annotator_agreement_equals_krippendorff_and_statsmodels(built, ratings):
    mart = read(built, "select * from annotator_agreement").set_index(["dimension", "rater_kind"])
    for (dim, kind), row in mart.iterrows():
        r = ratings[(ratings.dimension == dim) & (ratings.rater_kind == kind)]
        wide = r.pivot(index="item_id", columns="rater_id", values="value").sort_index(axis=1)
        x = pd.DataFrame({c: codes(dim, wide[c]) for c in wide.columns}, index=wide.index)
        assert row.n_annotators == x.shape[1] and row.n_items == len(x)
        assert row.n_items_complete == int(x.notna().all(axis=1).sum())
        level = "interval" if dim == "judge_score" else "nominal"
        assert row.alpha_level == level
        values = x.stack().unique()
        if x.shape[1] < 2:
            assert np.isnan(row.krippendorff_alpha) and "fewer than 2 annotators" in row.reason
            continue
        if len(values) < 2:
            assert np.isnan(row.krippendorff_alpha) and np.isnan(row.fleiss_kappa)
            assert "all ratings identical" in row.reason
            continue
        close(
            row.krippendorff_alpha,
            krippendorff.alpha(reliability_data=x.T.to_numpy(), level_of_measurement=level),
            f"{dim} {kind} alpha",
        )
        complete = x[x.notna().all(axis=1)].to_numpy()
        table, _ = aggregate_raters(complete)
        close(row.fleiss_kappa, fleiss_kappa(table, method="fleiss"), f"{dim} {kind} fleiss")
    human_score = mart.loc[("judge_score", "human")]
    assert (
        human_score.n_annotators == 3 and human_score.n_items_complete < human_score.n_items
    )  # h3 missing some
    assert not np.isnan(human_score.krippendorff_alpha) and not np.isnan(
        mart.loc[("judge_score", "judge")].fleiss_kappa
    )
    assert np.isnan(mart.loc[("abstain", "human")].krippendorff_alpha)


def test_disputed_items_equal_pandas_sd(built, ratings):
    human = ratings[(ratings.rater_kind == "human") & (ratings.dimension == "judge_score")]
    agg = (
        human.assign(v=human.value.astype(float)).groupby("item_id").v.agg(["count", "std", "mean"])
    )
    expected = agg[(agg["count"] >= 2) & (agg["std"] > 2)]
    mart = read(built, "select * from disputed_items").set_index("item_id").sort_index()
    assert list(mart.index) == sorted(expected.index) and len(mart) >= 3
    close(mart.sd, expected.loc[mart.index, "std"], "sd")
    close(mart.mean_score, expected.loc[mart.index, "mean"], "mean")
    assert (mart.n_ratings == expected.loc[mart.index, "count"]).all()
    assert (mart.item_kind == "generation").all() and (mart.sd_threshold == 2.0).all()


def test_marts_build_empty_with_types(tmp_path):
    wh = tmp_path / "empty.duckdb"
    run_dbt(
        [
            "build",
            "--select",
            "+significance",
            "+model_comparison",
            "+threshold_sensitivity",
            "+scaling",
            "+agreement",
            "+annotator_agreement",
            "+disputed_items",
        ],
        wh,
    )
    con = duckdb.connect(str(wh), read_only=True)
    try:
        for table, col, typ in (
            ("significance", "query_t_p", "DOUBLE"),
            ("significance", "significant", "BOOLEAN"),
            ("significance", "n_pairs", "BIGINT"),
            ("threshold_sensitivity", "threshold", "DOUBLE"),
            ("agreement", "reason", "VARCHAR"),
            ("annotator_agreement", "krippendorff_alpha", "DOUBLE"),
            ("disputed_items", "sd", "DOUBLE"),
            ("scaling", "spearman_p", "DOUBLE"),
            ("model_comparison", "k_models", "BIGINT"),
        ):
            assert con.execute(f"select count(*) from {table}").fetchone()[0] == 0
            types = dict(
                con.execute(
                    f"select column_name, data_type from information_schema.columns "
                    f"where table_name = '{table}'"
                ).fetchall()
            )
            assert types[col] == typ, (table, col)
    finally:
        con.close()


# --------------------------------------------------------------------------- reasons, rules, quality marts


REASONED = {  # mart -> (reason column, statistics that must never be NULL without it)
    "significance": (
        "reason",
        [
            "query_t_p",
            "min_detectable_diff",
            "paper_t_p",
            "paper_anova_f",
            "paper_anova_p",
            "pair_wilcoxon_p",
            "cohen_dz",
            "cohen_d_pooled",
            "ci_low",
            "ci_high",
            "p_holm",
            "p_bh",
        ],
    ),
    "model_comparison": ("reason", ["anova_f", "anova_p"]),
    "heterogeneity": (
        "reason",
        ["statistic", "p_value", "gap_pct", "gap_ci_low", "gap_ci_high", "min_detectable_gap_pct"],
    ),
    "threshold_sensitivity": ("reason", ["degradation_pct", "improvement_pct", "sign_test_p"]),
    "scaling": ("reason", ["spearman_rho", "spearman_p"]),
    "agreement": ("reason", ["accuracy", "spearman_rho", "spearman_p", "cohen_kappa"]),
    "annotator_agreement": ("reason", ["krippendorff_alpha", "fleiss_kappa"]),
}


def test_every_null_statistic_has_a_reason(built):
    for mart, (reason, columns) in REASONED.items():
        df = read(built, f"select * from {mart}")
        assert len(df), mart
        for col in columns:
            unexplained = df[df[col].isna() & df[reason].isna()]
            assert unexplained.empty, (mart, col, unexplained.head())
    # F is never negative and F = 0 goes with p = 1, in both ANOVA marts
    for mart, f, p in (
        ("significance", "paper_anova_f", "paper_anova_p"),
        ("model_comparison", "anova_f", "anova_p"),
    ):
        df = read(built, f"select {f} as f, {p} as p from {mart} where {f} is not null")
        assert (df.f >= 0).all() and (df[df.f == 0].p == 1.0).all()


def test_paper_literal_rule_reproduces_the_printed_formula(built, pairs, tmp_path):
    """The whole chain under var degradation_rule: paper_literal equals M_NQ - M_DQ >= 0.05 x M_NQ
    computed here on the raw scores; ties at a neutral score <= 0 count, unlike the default."""
    wh = tmp_path / "ableaudit.duckdb"
    shutil.copy(built, wh)
    # a model whose answers do not change: ties at a VADER score of 0, below 0 and above 0
    texts = {
        "edu_000": "the office and the plan",
        "edu_001": "sorry, this is difficult and hard",
        "edu_002": "great and helpful support",
    }
    edge = [
        gen_row("m-edge", q, "education", dis, t)
        for q, t in texts.items()
        for dis in (None, "vision", "hearing")
    ]
    assert vader(texts["edu_000"]) == 0.0 and vader(texts["edu_001"]) < 0 < vader(texts["edu_002"])
    con = connect(wh)
    try:
        con.register("edge", pd.DataFrame(edge))
        con.execute("insert into raw.generations by name select * from edge")
    finally:
        con.close()
    pairs = pd.concat(
        [
            pairs,
            pd.DataFrame(
                [
                    dict(
                        model_id="m-edge",
                        metric=metric,
                        neutral=float(fn(t)),
                        disability=float(fn(t)),
                    )
                    for t in texts.values()
                    for _ in ("vision", "hearing")
                    for metric, fn in (("vader", vader), ("verbosity", words))
                ]
            ),
        ],
        ignore_index=True,
    )
    run_dbt(
        [
            "run",
            "--select",
            "+degradation",
            "+threshold_sensitivity",
            "--vars",
            "{degradation_rule: paper_literal}",
        ],
        wh,
    )
    mart = read(
        wh, "select * from degradation where slice = 'overall' and metric in ('vader', 'verbosity')"
    )
    assert (mart.degradation_rule == "paper_literal").all()
    edge_vader = mart[(mart.model_id == "m-edge") & (mart.metric == "vader")].iloc[0]
    assert (edge_vader.n_pairs, edge_vader.n_degraded) == (
        6,
        4,
    )  # ties at 0 and below 0 count, above 0 not
    rows = []
    for (model, metric), p in pairs.groupby(["model_id", "metric"]):
        gap = (p.neutral - p.disability) if metric == "vader" else (p.disability - p.neutral)
        literal = gap >= 0.05 * p.neutral - 1e-12
        strict = (gap > 0) & (gap >= 0.05 * p.neutral.abs() - 1e-12)
        rows.append(
            dict(
                model_id=model,
                metric=metric,
                n_literal=int(literal.sum()),
                n_strict=int(strict.sum()),
                n_ties_nonpositive=int(((gap == 0) & (p.neutral <= 0)).sum()),
            )
        )
    expected = pd.DataFrame(rows).merge(mart, on=["model_id", "metric"])
    assert len(expected) == 10
    assert (expected.n_degraded == expected.n_literal).all()
    assert (expected.n_ties_nonpositive > 0).any() and (
        expected.n_literal > expected.n_strict
    ).any()
    assert (expected.n_literal > expected.n_strict).any() and (
        expected.n_literal >= expected.n_strict
    ).all()
    ts = read(
        wh,
        "select * from threshold_sensitivity where threshold = 0.05 and metric in ('vader', 'verbosity')",
    )
    merged = ts.merge(mart, on=["model_id", "metric"], suffixes=("", "_deg"))
    assert (merged.n_degraded == merged.n_degraded_deg).all() and (
        merged.degradation_rule == "paper_literal"
    ).all()


def test_judgment_quality_equals_pandas_counts(built):
    j = read(built, "select * from raw.judgments")
    keys = ["judge_name", "judge_model", "judge_revision", "judge_kind", "prompt_version", "source"]
    got = read(built, "select * from judgment_quality").set_index(keys).sort_index()
    ok_call = j.call_status == "ok"
    expected = (
        j.assign(
            err=~ok_call,
            parsed=ok_call & (j.parse_status == "parsed"),
            unparseable=ok_call & (j.parse_status == "unparseable"),
            usable=ok_call & j.parse_status.isin(["parsed", "repaired"]),
        )
        .groupby(keys)
        .agg(
            n_verdicts=("judgment_id", "size"),
            n_call_errors=("err", "sum"),
            n_parsed=("parsed", "sum"),
            n_unparseable=("unparseable", "sum"),
            n_usable=("usable", "sum"),
        )
    )
    assert list(got.index) == list(expected.index) and len(got) == 3
    for col in expected.columns:
        assert (got[col] == expected[col]).all(), col
    close(got.call_error_pct, 100 * expected.n_call_errors / expected.n_verdicts, "call_error_pct")
    close(
        got.parsed_pct,
        100 * expected.n_parsed / (expected.n_verdicts - expected.n_call_errors),
        "parsed_pct",
    )
    close(got.usable_pct, 100 * expected.n_usable / expected.n_verdicts, "usable_pct")
    assert got.loc[got.index.get_level_values("judge_name") == "j2", "n_call_errors"].item() > 0


def test_data_quality_equals_pandas_counts(built, pairs):
    g = read(built, "select * from raw.generations")
    dq = read(built, "select * from data_quality")
    gen = dq[dq.area == "generation"].groupby(["model_id", "status"]).n_rows.sum()
    expected = g.groupby(["model_id", "status"]).size()
    assert gen.sort_index().to_dict() == expected.sort_index().to_dict()
    # every disability-aware generation is a pair; the included ones are the pairs built here
    pair_rows = dq[dq.area == "pair"].groupby("model_id").n_rows.sum()
    assert (
        pair_rows.to_dict() == g[g.condition == "disability"].groupby("model_id").size().to_dict()
    )
    rate = dq[(dq.area == "rate") & dq.metric.isin(["vader", "verbosity"])]
    included = rate[rate.status == "included"].groupby(["model_id", "metric"]).n_rows.sum()
    assert included.to_dict() == pairs.groupby(["model_id", "metric"]).size().to_dict()
    total = rate.groupby(["model_id", "metric"]).n_rows.sum()
    assert (total == pair_rows.reindex(total.index.get_level_values(0)).to_numpy()).all()
    # Regard is unavailable: every pair of it is out of the rate, with the scorer's status
    regard = dq[(dq.area == "rate") & (dq.metric == "regard")]
    assert "included" not in set(regard.status) and regard.n_rows.sum() == pair_rows.sum()
    assert regard.status.str.contains("unavailable").any()


def test_degradation_rate_interval_equals_statsmodels_wilson(built):
    from statsmodels.stats.proportion import proportion_confint

    deg = read(
        built,
        "select n_pairs, n_degraded, degradation_ci_low_pct, degradation_ci_high_pct from degradation",
    )
    counted = deg[deg.n_pairs > 0]
    assert len(counted) > 0 and deg[deg.n_pairs == 0].degradation_ci_low_pct.isna().all()
    low, high = proportion_confint(counted.n_degraded, counted.n_pairs, alpha=0.05, method="wilson")
    assert np.allclose(counted.degradation_ci_low_pct, 100 * low, atol=1e-9)
    assert np.allclose(counted.degradation_ci_high_pct, 100 * high, atol=1e-9)


def _cluster_interval(flags: pd.Series, queries: pd.Series) -> dict:
    """The rate interval that counts each query once, from statsmodels: the cluster-robust
    variance of the share (OLS on a constant, cov_type='cluster'), the design effect over the
    binomial variance, and statsmodels' Wilson interval at the effective number of pairs with
    Student's t at queries - 1 degrees of freedom; Wilson's where every query gives one pair."""
    import statsmodels.api as sm
    from statsmodels.stats.proportion import proportion_confint

    y = flags.to_numpy(dtype=float)
    n, x, k = len(y), y.sum(), queries.nunique()
    if queries.value_counts().max() == 1:
        low, high = proportion_confint(x, n, alpha=0.05, method="wilson")
        return dict(method="wilson", deff=1.0, low=100 * low, high=100 * high)
    if k < 2:
        return dict(method="one_query", deff=np.nan, low=np.nan, high=np.nan)
    p = x / n
    codes = pd.factorize(queries)[0]
    robust = sm.OLS(y, np.ones((n, 1))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    v = float(robust.bse[0] ** 2)
    deff = 1.0 if p in (0.0, 1.0) or v <= 0 else max(1.0, v * n / (p * (1 - p)))
    n_eff = n / deff
    alpha = 2 * stats.norm.sf(stats.t.ppf(0.975, k - 1))
    low, high = proportion_confint(p * n_eff, n_eff, alpha=alpha, method="wilson")
    return dict(method="wilson_design_effect", deff=deff, low=100 * low, high=100 * high, v=v)


def _check_rate_intervals(mart: pd.DataFrame, flags: pd.DataFrame, key: list[str], rate: str):
    """Every row of `mart` against _cluster_interval of its slice's flags, and vs_overall."""
    import statsmodels.api as sm

    sliced = {
        "overall": lambda g, v: g,
        "domain": lambda g, v: g[g.domain == v],
        "disability": lambda g, v: g[g.disability_id == v],
        "domain_disability": lambda g, v: g[g.domain + "|" + g.disability_id == v],
    }
    methods, gee_checked = set(), 0
    for group, g in flags.groupby(key):
        rows = mart.set_index(key).loc[group]
        overall = rows[rows.slice == "overall"][rate].item()
        for r in rows.itertuples():
            f = sliced[r.slice](g, r.slice_value)
            if f.empty:
                continue
            e = _cluster_interval(f.flag, f.query_id)
            methods.add(e["method"])
            assert r.rate_ci_method == e["method"], (group, r.slice, r.slice_value)
            close(
                [r.design_effect, r.rate_ci_low_pct, r.rate_ci_high_pct],
                [e["deff"], e["low"], e["high"]],
                (group, r.slice, r.slice_value),
                atol=1e-9,
            )
            if "v" in e and 0 < f.flag.mean() < 1 and gee_checked < 20:
                # GEE with an independence working correlation: the same sandwich variance,
                # without the k / (k - 1) small-sample factor
                k = f.query_id.nunique()
                gee = sm.GEE(
                    f.flag.to_numpy(dtype=float),
                    np.ones((len(f), 1)),
                    groups=pd.factorize(f.query_id)[0],
                    family=sm.families.Gaussian(),
                    cov_struct=sm.cov_struct.Independence(),
                ).fit()
                close(gee.bse[0] ** 2 * k / (k - 1), e["v"], "GEE", rtol=1e-6)
                gee_checked += 1
            if r.slice == "overall" or np.isnan(e["low"]):
                assert r.vs_overall is None or r.vs_overall != r.vs_overall
            else:
                expected = (
                    "above" if e["low"] > overall else "below" if e["high"] < overall else "within"
                )
                assert r.vs_overall == expected, (group, r.slice, r.slice_value)
    return methods, gee_checked


def test_rate_intervals_count_each_query_once_as_statsmodels_does(built):
    """degradation's and interpretive_shift's rate_ci_*: Wilson's where each query gives one pair,
    the design-effect Wilson interval (statsmodels' cluster-robust variance, checked against GEE
    too) with Student's t where a query gives several; vs_overall from those intervals."""
    deg = read(built, "select * from degradation where metric in ('vader', 'verbosity')")
    flags = read(
        built,
        "select model_id, metric, domain, disability_id, query_id, degraded::int as flag "
        "from int_pair_scores where included and metric in ('vader', 'verbosity')",
    )
    methods, gee_checked = _check_rate_intervals(
        deg, flags, ["model_id", "metric"], "degradation_pct"
    )
    assert methods == {"wilson", "wilson_design_effect"} and gee_checked >= 10
    # the overall and domain slices pool nine pairs per neutral answer: wider than Wilson's
    pooled = deg[deg.slice.isin(["overall", "domain"]) & (deg.n_pairs > 9)]
    assert (pooled.rate_ci_method == "wilson_design_effect").all()
    assert (pooled.rate_ci_high_pct - pooled.rate_ci_low_pct).sum() > (
        pooled.degradation_ci_high_pct - pooled.degradation_ci_low_pct
    ).sum()
    assert (pooled.design_effect > 1).any() and set(deg.vs_overall.dropna()) >= {"within"}
    shift = read(built, "select * from interpretive_shift")
    labels = read(
        built,
        "select model_id, judge_name, domain, disability_id, query_id, interpret = 'Yes' as flag "
        "from int_pair_judgments where included",
    ).assign(dimension="interpret")
    methods, _ = _check_rate_intervals(
        shift[shift.dimension == "interpret"], labels, ["model_id", "judge_name"], "yes_pct"
    )
    assert "wilson_design_effect" in methods


def test_heterogeneity_equals_cochrans_q_and_f_oneway(built):
    """Across categories Cochran's Q on neutral-answer blocks; across domains an ANOVA of
    per-query rates; the worst and best levels and the gap from pandas."""
    from statsmodels.stats.contingency_tables import cochrans_q

    mart = read(built, "select * from heterogeneity").set_index(["model_id", "metric", "factor"])
    flags = read(
        built,
        "select model_id, metric, domain, disability_id, query_id, neutral_generation_id, "
        "degraded::int as degraded from int_pair_scores where included and degraded is not null",
    )
    assert len(mart) == 2 * flags.groupby(["model_id", "metric"]).ngroups
    tested = mde_tested = 0
    for (model, metric), g in flags.groupby(["model_id", "metric"]):
        cat = mart.loc[(model, metric, "disability")]
        blocks = g.pivot_table(
            index="neutral_generation_id", columns="disability_id", values="degraded"
        ).dropna()
        assert cat.n_blocks == len(blocks)
        if len(blocks) >= 2 and blocks.nunique(axis=1).max() > 1:
            res = cochrans_q(blocks.to_numpy().astype(int))
            close([cat.statistic, cat.p_value], [res.statistic, res.pvalue], (model, metric))
            tested += 1
        else:
            assert np.isnan(cat.p_value) and "cochrans_q" in cat.reason
        dom = mart.loc[(model, metric, "domain")]
        rates = g.groupby(["domain", "query_id"]).degraded.mean()
        groups = [v.to_numpy() for _, v in rates.groupby(level="domain")]
        if len(groups) > 1 and any(np.ptp(v) > 0 for v in groups if len(v) > 1):
            f = stats.f_oneway(*groups)
            if np.isfinite(f.statistic) and f.statistic > 0:
                close([dom.statistic, dom.p_value], [f.statistic, f.pvalue], (model, metric))
        for factor, col in (("disability", "disability_id"), ("domain", "domain")):
            row = mart.loc[(model, metric, factor)]
            by_level = 100 * g.groupby(col).degraded.mean()
            if len(by_level) < 2:
                assert np.isnan(row.gap_pct) and f"fewer than 2 {factor} levels" in row.reason
                continue
            close(row.gap_pct, by_level.max() - by_level.min(), (model, metric, factor))
            assert by_level[row.worst_level] == by_level.max()
            assert row.gap_ci_low <= row.gap_pct <= row.gap_ci_high or np.isnan(row.gap_ci_low)
            # the smallest detectable gap has 80 % power by scipy's noncentral t
            rates = (
                g[g[col].isin([row.worst_level, row.best_level])]
                .groupby(["query_id", col])
                .degraded.mean()
                .unstack(col)
            )
            if factor == "disability":
                d = (rates[row.worst_level] - rates[row.best_level]).dropna()
                df, sd, scale = len(d) - 1, d.std(ddof=1), np.sqrt(len(d))
            else:
                a, b = rates[row.worst_level].dropna(), rates[row.best_level].dropna()
                df = len(a) + len(b) - 2
                sd = np.sqrt((((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()) / df)
                scale = np.sqrt(len(a) * len(b) / (len(a) + len(b)))
            if np.isnan(row.min_detectable_gap_pct):
                assert "min_detectable_gap" in row.reason
                continue
            nc = row.min_detectable_gap_pct / 100 / sd * scale
            crit = stats.t.ppf(0.975, df)
            power = stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)
            assert power == pytest.approx(0.8, abs=1e-4), (model, metric, factor)
            mde_tested += 1
    assert tested >= 2 and mde_tested >= 4
