"""ableaudit.stats.agreement against scipy, sklearn, statsmodels and krippendorff called
directly, published worked examples, and hand computations."""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from ableaudit.stats.agreement import (
    ANNOTATOR_SCHEMA,
    DISPUTED_SCHEMA,
    FINAL_SCORES_SCHEMA,
    PAIRWISE_SCHEMA,
    SCALES,
    annotator_agreement,
    disputed_items,
    final_scores,
    kind_pair,
    normalize_labels,
    pairwise_agreement,
    sample_shortfall,
    stratified_sample,
    validate_annotations,
)


def _no_warnings(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def make_scores(seed=0, n_items=40) -> pd.DataFrame:
    """judge_score 1-10 from 3 humans, 2 judges, 1 detector; ties everywhere, ~10% missing."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(2, 10, size=n_items)
    raters = [
        ("h1", "human"),
        ("h2", "human"),
        ("h3", "human"),
        ("qwen", "judge"),
        ("gpt", "judge"),
        ("regard", "detector"),
    ]
    rows = []
    for r, kind in raters:
        noise = {"human": 1, "judge": 2, "detector": 3}[kind]
        for i, t in enumerate(truth):
            if rng.random() < 0.1:
                continue  # missing rating
            v = int(np.clip(t + rng.integers(-noise, noise + 1), 1, 10))
            rows.append(
                dict(
                    item_id=f"i{i:02d}",
                    dimension="judge_score",
                    rater_id=r,
                    rater_kind=kind,
                    value=v,
                )
            )
    return pd.DataFrame(rows)


def make_labels(seed=1, n_items=30) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    truth = rng.choice(["No", "Ambiguous", "Yes"], size=n_items, p=[0.6, 0.15, 0.25])
    rows = []
    for r, kind, flip in (("h1", "human", 0.1), ("h2", "human", 0.15), ("qwen", "judge", 0.2)):
        for i, t in enumerate(truth):
            if r == "h2" and i % 7 == 0:
                continue
            v = rng.choice(["No", "Ambiguous", "Yes"]) if rng.random() < flip else t
            rows.append(
                dict(item_id=f"p{i}", dimension="stereotype", rater_id=r, rater_kind=kind, value=v)
            )
    return pd.DataFrame(rows)


def _both(df, dim, a, b):
    w = df[df.dimension == dim].pivot(index="item_id", columns="rater_id", values="value")
    return w[[a, b]].dropna()


def _weighted_kappa_by_hand(a, b, cats, power):
    k = len(cats)
    idx = {c: i for i, c in enumerate(cats)}
    obs = np.zeros((k, k))
    for x, y in zip(a, b):
        obs[idx[x], idx[y]] += 1
    obs /= obs.sum()
    exp = np.outer(obs.sum(1), obs.sum(0))
    i, j = np.indices((k, k))
    w = np.abs(i - j) ** power
    return 1 - (w * obs).sum() / (w * exp).sum()


# --------------------------------------------------------------------------- pairwise


def test_pairwise_scores_match_scipy_sklearn_and_hand():
    df = make_scores()
    out = _no_warnings(pairwise_agreement, df)
    assert dict(out.dtypes.astype(str)) == PAIRWISE_SCHEMA
    assert len(out) == 15  # C(6, 2) rater pairs
    assert out.reason.isna().all(), out.reason.dropna().tolist()
    cats = list(range(1, 11))
    for r in out.itertuples():
        both = _both(df, "judge_score", r.rater_a, r.rater_b)
        a, b = both[r.rater_a].astype(int).to_numpy(), both[r.rater_b].astype(int).to_numpy()
        assert r.n_items == len(both) < 40  # missing ratings dropped pairwise
        sp = stats.spearmanr(a, b)
        assert r.spearman_rho == pytest.approx(sp.statistic) and r.spearman_p == pytest.approx(
            sp.pvalue
        )
        assert r.cohen_kappa == pytest.approx(cohen_kappa_score(a, b, labels=cats))
        assert r.kappa_linear == pytest.approx(
            cohen_kappa_score(a, b, labels=cats, weights="linear")
        )
        assert r.kappa_quadratic == pytest.approx(
            cohen_kappa_score(a, b, labels=cats, weights="quadratic")
        )
        assert r.kappa_linear == pytest.approx(_weighted_kappa_by_hand(a, b, cats, 1))
        assert r.kappa_quadratic == pytest.approx(_weighted_kappa_by_hand(a, b, cats, 2))
        assert r.accuracy == pytest.approx(np.mean(a == b))
    assert set(out.kind_pair) == {
        "human_vs_human",
        "human_vs_judge",
        "human_vs_detector",
        "judge_vs_judge",
        "detector_vs_judge",
    }
    hj = out[out.kind_pair == "human_vs_judge"]
    assert (hj.kind_a == "human").all() and (hj.kind_b == "judge").all()


def test_weighted_kappa_uses_scale_distance_not_observed_rank():
    # values 1, 5, 10 only: with the full 1-10 scale 1 vs 5 is far closer than 1 vs 10
    df = pd.DataFrame(
        {
            "item_id": [f"i{k}" for k in range(6)] * 2,
            "dimension": "judge_score",
            "rater_id": ["a"] * 6 + ["b"] * 6,
            "rater_kind": ["human"] * 6 + ["judge"] * 6,
            "value": [1, 5, 10, 1, 5, 10] + [5, 1, 10, 10, 5, 1],
        }
    )
    r = pairwise_agreement(df).iloc[0]
    assert r.kappa_linear == pytest.approx(
        _weighted_kappa_by_hand(df.value[:6], df.value[6:], list(range(1, 11)), 1)
    )
    assert r.kappa_quadratic == pytest.approx(
        _weighted_kappa_by_hand(df.value[:6], df.value[6:], list(range(1, 11)), 2)
    )
    for col, w in (("kappa_linear", "linear"), ("kappa_quadratic", "quadratic")):
        assert r[col] != pytest.approx(cohen_kappa_score(df.value[:6], df.value[6:], weights=w))


def test_pairwise_labels():
    df = make_labels()
    out = _no_warnings(pairwise_agreement, df)
    order = ["No", "Ambiguous", "Yes"]
    for r in out.itertuples():
        both = _both(df, "stereotype", r.rater_a, r.rater_b)
        a, b = both[r.rater_a].to_numpy(), both[r.rater_b].to_numpy()
        assert r.scale_type == "label" and r.n_items == len(both)
        assert r.cohen_kappa == pytest.approx(
            cohen_kappa_score(a, b)
        )  # encoding-free for unweighted
        assert r.accuracy == pytest.approx(np.mean(a == b))
        assert r.kappa_quadratic == pytest.approx(_weighted_kappa_by_hand(a, b, order, 2))
        codes = {v: i for i, v in enumerate(order)}
        sp = stats.spearmanr([codes[x] for x in a], [codes[x] for x in b])
        assert r.spearman_rho == pytest.approx(sp.statistic)
    nominal = pairwise_agreement(df, {"stereotype": {"type": "label", "values": order}})
    assert nominal.spearman_rho.isna().all() and nominal.kappa_linear.isna().all()
    assert nominal.reason.str.contains("nominal labels").all()
    np.testing.assert_allclose(nominal.cohen_kappa, out.cohen_kappa)


def _two(a, b, dim="judge_score"):
    items = [f"i{k}" for k in range(len(a))]
    df = pd.DataFrame(
        {
            "item_id": items * 2,
            "dimension": dim,
            "rater_id": ["h"] * len(a) + ["j"] * len(b),
            "rater_kind": ["human"] * len(a) + ["judge"] * len(b),
            "value": list(a) + list(b),
        }
    )
    return _no_warnings(pairwise_agreement, df.dropna(subset=["value"])).iloc[0]


def test_pairwise_degenerate():
    r = _two([5, 5, 5], [5, 5, 5])  # both constant and equal
    assert np.isnan(r.spearman_rho) and np.isnan(r.cohen_kappa) and np.isnan(r.kappa_quadratic)
    assert (
        r.accuracy == 1.0
        and "constant ratings from h, j" in r.reason
        and "one category only" in r.reason
    )
    r = _two([5, 5, 5], [4, 6, 7])  # one constant rater: no rank correlation, kappa still defined
    assert np.isnan(r.spearman_rho) and "constant ratings from h" in r.reason
    assert r.cohen_kappa == pytest.approx(
        cohen_kappa_score([5, 5, 5], [4, 6, 7], labels=list(range(1, 11)))
    )
    r = _two([5], [5])
    assert r.n_items == 1 and r.accuracy == 1.0 and np.isnan(r.cohen_kappa) and "n<2" in r.reason
    r = _two([3, 8], [4, 9])  # n=2: rho is defined, its p is not
    assert (
        r.spearman_rho == pytest.approx(1.0)
        and np.isnan(r.spearman_p)
        and "spearman_p: n<3" in r.reason
    )
    r = _two([3, np.nan, 8], [np.nan, 4, 9])  # one common item after pairwise deletion
    assert r.n_items == 1
    disjoint = pd.DataFrame(
        {
            "item_id": ["a", "b"],
            "dimension": "judge_score",
            "rater_id": ["h", "j"],
            "rater_kind": ["human", "judge"],
            "value": [3, 4],
        }
    )
    r = pairwise_agreement(disjoint).iloc[0]
    assert r.n_items == 0 and np.isnan(r.accuracy) and "no items rated by both" in r.reason
    r = _two([2.5, 7.25, 3.0], [3.0, 7.0, 2.0])  # non-integer scores: Spearman yes, kappa no
    assert not np.isnan(r.spearman_rho) and np.isnan(r.cohen_kappa) and "non-integer" in r.reason
    empty = pairwise_agreement(disjoint.iloc[:0])
    assert empty.empty and dict(empty.dtypes.astype(str)) == PAIRWISE_SCHEMA


def test_kind_pair_names():
    assert kind_pair("judge", "human") == "human_vs_judge"
    assert kind_pair("judge", "detector") == "detector_vs_judge"
    assert kind_pair("judge", "judge") == "judge_vs_judge"


# --------------------------------------------------------------------------- many annotators

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C:
# 4 observers, 12 units, missing values; published alpha nominal 0.743, interval 0.849.
KRIPP = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


def _long(matrix, dim, as_label=False):
    rows = []
    for o, obs in enumerate(matrix):
        for u, v in enumerate(obs):
            if not np.isnan(v):
                rows.append(
                    dict(
                        item_id=f"u{u:02d}",
                        dimension=dim,
                        rater_id=f"obs{o}",
                        rater_kind="human",
                        value=f"c{int(v)}" if as_label else v,
                    )
                )
    return pd.DataFrame(rows)


def test_krippendorff_published_example_and_library():
    scales = {
        "s": {"type": "score", "min": 1, "max": 5, "integer": True},
        "l": {"type": "label", "values": [f"c{k}" for k in range(1, 6)]},
    }
    df = pd.concat([_long(KRIPP, "s"), _long(KRIPP, "l", as_label=True)])
    out = _no_warnings(annotator_agreement, df, scales).set_index("dimension")
    assert dict(out.reset_index().dtypes.astype(str)) == ANNOTATOR_SCHEMA
    assert out.loc["s", "krippendorff_alpha"] == pytest.approx(0.849, abs=5e-4)
    assert out.loc["l", "krippendorff_alpha"] == pytest.approx(0.743, abs=5e-4)
    assert out.loc["s", "alpha_level"] == "interval" and out.loc["l", "alpha_level"] == "nominal"
    assert out.loc["s", "krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(KRIPP, level_of_measurement="interval")
    )
    assert out.loc["l", "krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(KRIPP, level_of_measurement="nominal")
    )
    # counts: 12 units, 11 with >= 2 ratings, 8 rated by all four observers
    assert tuple(
        out.loc["s", ["n_annotators", "n_items", "n_items_pairable", "n_items_complete"]]
    ) == (4, 12, 11, 8)
    # Fleiss on the complete units only, as statsmodels computes it on them
    complete = np.array(KRIPP).T
    complete = complete[~np.isnan(complete).any(axis=1)]
    assert out.loc["s", "fleiss_kappa"] == pytest.approx(
        fleiss_kappa(aggregate_raters(complete)[0])
    )
    assert out.loc["l", "fleiss_kappa"] == pytest.approx(out.loc["s", "fleiss_kappa"])


def test_fleiss_published_example():
    # Fleiss (1971) / Wikipedia worked example: 10 subjects, 14 raters, 5 categories, kappa 0.210
    counts = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    rows = []
    for i, c in enumerate(counts):
        values = np.repeat(np.arange(1, 6), c)
        for r, v in enumerate(values):
            rows.append(
                dict(item_id=f"s{i}", dimension="judge_score", rater_id=f"r{r}", value=int(v))
            )
    out = annotator_agreement(pd.DataFrame(rows)).iloc[0]
    assert out.fleiss_kappa == pytest.approx(0.20993, abs=1e-5)
    assert out.fleiss_kappa == pytest.approx(fleiss_kappa(np.array(counts)))
    assert (out.n_annotators, out.n_items_complete) == (14, 10)


def test_annotator_agreement_only_humans_and_degenerate():
    df = pd.concat([make_scores(), make_labels()])
    out = _no_warnings(annotator_agreement, df)
    assert set(out.dimension) == {"judge_score", "stereotype"}
    assert (out.n_annotators == [3, 2]).all()  # judges and detector left out
    judges = annotator_agreement(df, kinds=("judge",))
    assert (judges.n_annotators == [2, 1]).all()
    r = judges.set_index("dimension").loc["stereotype"]
    assert np.isnan(r.fleiss_kappa) and "fewer than 2 annotators" in r.reason
    same = pd.DataFrame(
        {
            "item_id": ["a", "a", "b", "b"],
            "dimension": "judge_score",
            "rater_id": ["h1", "h2", "h1", "h2"],
            "value": [7, 7, 7, 7],
        }
    )
    r = _no_warnings(annotator_agreement, same).iloc[0]
    assert np.isnan(r.fleiss_kappa) and np.isnan(r.krippendorff_alpha)
    assert (
        "fleiss_kappa: all ratings identical" in r.reason
        and "krippendorff_alpha: all ratings identical" in r.reason
    )
    sparse = pd.DataFrame(
        {
            "item_id": ["a", "b", "c"],
            "dimension": "judge_score",
            "rater_id": ["h1", "h2", "h1"],
            "value": [3, 5, 9],
        }
    )
    r = _no_warnings(annotator_agreement, sparse).iloc[0]
    assert r.n_items_pairable == 0 and "no item rated by 2 or more" in r.reason
    empty = annotator_agreement(sparse.iloc[:0])
    assert empty.empty and dict(empty.dtypes.astype(str)) == ANNOTATOR_SCHEMA


# --------------------------------------------------------------------------- disputes


def test_final_scores_and_disputes():
    df = pd.DataFrame(
        {
            "item_id": ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["d"] + ["e"] * 2,
            "dimension": "judge_score",
            "rater_id": ["h1", "h2", "h3"] * 3 + ["h1", "h1", "qwen"],
            "rater_kind": ["human"] * 11 + ["judge"],
            "value": [
                1,
                3,
                5,  # sd exactly 2: not disputed (sd > tau)
                1,
                5,
                5,  # sd 2.31: disputed
                7,
                7,
                8,
                4,  # one rating
                2,
                10,
            ],  # the judge is not an annotator
        }
    )
    fs = _no_warnings(final_scores, df)
    assert dict(fs.dtypes.astype(str)) == FINAL_SCORES_SCHEMA
    ref = df[df.rater_kind == "human"].groupby("item_id").value.agg(["mean", "std", "size"])
    fs = fs.set_index("item_id")
    np.testing.assert_allclose(fs["mean_score"], ref["mean"])
    np.testing.assert_allclose(fs["sd"], ref["std"])  # pandas std is ddof=1
    assert fs.disputed.to_dict() == {"a": False, "b": True, "c": False, "d": False, "e": False}
    assert np.isnan(fs.loc["d", "sd"]) and "n<2" in fs.loc["d", "reason"]
    dis = disputed_items(df)
    assert dict(dis.dtypes.astype(str)) == DISPUTED_SCHEMA
    assert dis.item_id.tolist() == ["b"] and dis.mean_score.iloc[0] == pytest.approx(11 / 3)
    assert disputed_items(df, sd_threshold=1.9).item_id.tolist() == ["a", "b"]
    labels_only = make_labels()
    assert final_scores(labels_only).empty and disputed_items(labels_only).empty


# --------------------------------------------------------------------------- sample


def _items(per_domain=None):
    per_domain = per_domain or {"education": 60, "finance": 60, "health": 7}
    rows = []
    dis = ["vision", "hearing", "speech", "mobility", None]
    for dom, n in per_domain.items():
        for k in range(n):
            rows.append(
                dict(
                    item_id=f"{dom}-{k:03d}",
                    domain=dom,
                    disability_id=dis[k % 5 if dom != "finance" else (0 if k < 52 else 1 + k % 4)],
                )
            )
    return pd.DataFrame(rows)


def test_stratified_sample_balance_determinism_shortfall():
    items = _items()
    s = stratified_sample(items, size_per_domain=20, seed=3)
    assert s.groupby("domain").size().to_dict() == {"education": 20, "finance": 20, "health": 7}
    assert s.item_id.is_unique and set(s.item_id) <= set(items.item_id)
    edu = s[s.domain == "education"].disability_id.fillna("none").value_counts()
    assert len(edu) == 5 and edu.max() - edu.min() <= 1  # 4 per group
    # finance has 52 'vision' items and 2 of each other group: those are taken whole,
    # vision fills the rest
    fin = s[s.domain == "finance"].disability_id.fillna("none").value_counts()
    assert fin.to_dict() == {"vision": 12, "hearing": 2, "speech": 2, "mobility": 2, "none": 2}
    assert s[s.domain == "health"].domain_shortfall.unique().tolist() == [13]
    assert (s[s.domain != "health"].domain_shortfall == 0).all()
    assert (
        s.groupby("domain")
        .sample_order.apply(lambda x: list(x) == list(range(1, len(x) + 1)))
        .all()
    )
    # deterministic, independent of row order, and seed-dependent
    again = stratified_sample(items.sample(frac=1, random_state=9), size_per_domain=20, seed=3)
    pd.testing.assert_frame_equal(s.reset_index(drop=True), again.reset_index(drop=True))
    other = stratified_sample(items, size_per_domain=20, seed=4)
    assert set(other.item_id) != set(s.item_id)
    # a domain's sample does not depend on other domains being present
    alone = stratified_sample(items[items.domain == "education"], size_per_domain=20, seed=3)
    assert alone.item_id.tolist() == s[s.domain == "education"].item_id.tolist()
    sf = sample_shortfall(items, 20, domains=["education", "finance", "health", "media"]).set_index(
        "domain"
    )
    assert sf.loc["health"].tolist() == [20, 7, 7, 13] and sf.loc["media"].tolist() == [
        20,
        0,
        0,
        20,
    ]
    empty = stratified_sample(items.iloc[:0], 5, seed=0)
    assert empty.empty and "sample_order" in empty.columns


def test_stratified_sample_round_robin_small():
    items = pd.DataFrame(
        {
            "item_id": list("abcdefg"),
            "domain": "d",
            "disability_id": ["x", "x", "x", "y", "y", "z", "z"],
        }
    )
    for seed in range(10):
        s = stratified_sample(items, 3, seed=seed)
        assert sorted(s.disability_id) == ["x", "y", "z"]
        s = stratified_sample(items, 5, seed=seed)
        assert s.disability_id.value_counts().max() == 2


# --------------------------------------------------------------------------- import validation


def test_validate_annotations():
    ok = pd.DataFrame(
        {
            "item_id": ["a", "a", "b"],
            "dimension": ["judge_score", "stereotype", "abstain"],
            "rater_id": ["h1"] * 3,
            "value": [7, "Ambiguous", "No"],
        }
    )
    assert validate_annotations(ok) == []
    assert validate_annotations(ok.assign(value=[7, None, "Yes"])) == []  # blank = not rated
    bad = pd.DataFrame(
        {
            "item_id": ["a", "a", "b", None, "c", "c", "d", "d", "e"],
            "dimension": [
                "judge_score",
                "judge_score",
                "judge_score",
                "judge_score",
                "stereotype",
                "tone",
                "judge_score",
                "judge_score",
                "framing",
            ],
            "rater_id": ["h1", "h2", "h1", "h1", "h1", "h1", "h1", "h1", "h1"],
            "rater_kind": ["human"] * 8 + ["robot"],
            "value": [11, 6.5, "x", 5, "yes", 3, 4, 5, "Maybe"],
        }
    )
    problems = validate_annotations(bad)
    text = "\n".join(problems)
    assert "row 1: judge_score score 11 is outside [1, 10]" in text
    assert "row 2: judge_score score 6.5 is not a whole number" in text
    assert "row 3: judge_score score 'x' is not a number" in text
    assert "row 4: missing item_id" in text
    assert (
        "row 5: stereotype label 'yes' is not one of No, Ambiguous, Yes (spelling differs" in text
    )
    assert "row 6: unknown dimension 'tone'" in text
    assert "duplicate rating of item 'd' by 'h1' on 'judge_score' (rows 7, 8)" in text
    assert "row 9: unknown rater_kind 'robot'" in text
    assert "row 9: framing label 'Maybe'" in text
    assert validate_annotations(bad.drop(columns=["value"])) == [
        "missing column(s): value (need item_id, dimension, rater_id, value)"
    ]
    many = pd.DataFrame(
        {
            "item_id": [f"i{k}" for k in range(30)],
            "dimension": "judge_score",
            "rater_id": "h",
            "value": 99,
        }
    )
    assert validate_annotations(many)[-1] == "... and 10 more value problem(s)"


def test_normalize_labels_then_validate():
    df = pd.DataFrame(
        {
            "item_id": ["a", "b", "c", "d"],
            "dimension": ["stereotype", "abstain", "abstain", "judge_score"],
            "rater_id": "h1",
            "value": [" yes", "true", "0", 7],
        }
    )
    norm = normalize_labels(df)
    assert norm.value.tolist() == ["Yes", "Yes", "No", 7]
    assert validate_annotations(norm) == []
    assert SCALES["abstain"]["values"] == ["No", "Yes"]
