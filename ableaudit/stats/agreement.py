"""Agreement between raters: humans, LLM judges and detectors (marts `agreement`,
`annotator_agreement`, `disputed_items`), plus the annotation sample and its validation.

Ratings are long format, one row per (item_id, dimension, rater_id):

    item_id     what was rated (a response, or a neutral/disability-aware pair)
    dimension   a key of `scales` (default SCALES)
    rater_id    an annotator, a judge name or a detector name
    rater_kind  'human' | 'judge' | 'detector' (optional column; default 'human')
    value       a number for score dimensions, a label string for label dimensions

A missing value is a missing rating (not rated): it is dropped, pairwise. When a
rater rated an item twice on a dimension, the last row wins (validate_annotations
reports such duplicates).

Scales: dimension -> {"type": "score", "min": 1, "max": 10, "integer": True}
or {"type": "label", "values": [...in order...], "ordered": True|False}. An
ordered label scale is also read as ordinal (codes 0..k-1 in the listed order) for
Spearman and weighted kappa. A dimension missing from `scales` is read as a score
when all its values are numeric, else as a nominal label.

Default SCALES: judge_score 1-10 integers (AccessEval rubric: relevance, completeness,
accuracy 3 points each, clarity 1); interpret / stereotype / framing No < Ambiguous <
Yes (VLM paper E); abstain No < Yes (the judge abstained: Yes). Booleans and yes/no
spellings are mapped onto No/Yes by `normalize_labels`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from ableaudit.stats._common import (
    Reasons,
    finite,
    is_zero_sd,
    quiet_call,
    require_columns,
    stable_seed,
    typed_frame,
)
from ableaudit.stats.ranks import EXACT_SPEARMAN_MAX_N, SPEARMAN_EXACT, SPEARMAN_T, spearman_exact_p

NO_AMB_YES = ["No", "Ambiguous", "Yes"]
SCALES: dict[str, dict] = {
    "judge_score": {"type": "score", "min": 1, "max": 10, "integer": True},
    "interpret": {"type": "label", "values": NO_AMB_YES, "ordered": True},
    "stereotype": {"type": "label", "values": NO_AMB_YES, "ordered": True},
    "framing": {"type": "label", "values": NO_AMB_YES, "ordered": True},
    "abstain": {"type": "label", "values": ["No", "Yes"], "ordered": True},
}
RATER_KINDS = ("human", "detector", "judge")  # also the order within a kind_pair name
DISPUTE_SD = 2.0  # AccessEval C.2, Eq. 3: disputed when sd > tau, tau = 2

PAIRWISE_SCHEMA: dict[str, str] = {
    "dimension": "str",
    "scale_type": "str",  # 'score' | 'label'
    "rater_a": "str",
    "rater_b": "str",
    "kind_a": "str",
    "kind_b": "str",
    "kind_pair": "str",  # e.g. 'human_vs_judge', 'judge_vs_judge', 'human_vs_human'
    "n_items": "int64",  # items rated by both
    "spearman_rho": "float64",
    "spearman_p": "float64",
    "spearman_method": "str",
    "cohen_kappa": "float64",
    "kappa_linear": "float64",
    "kappa_quadratic": "float64",
    "accuracy": "float64",  # share of items with exactly the same value
    "reason": "str",
}

ANNOTATOR_SCHEMA: dict[str, str] = {
    "dimension": "str",
    "rater_kind": "str",  # the kinds pooled, e.g. 'human'
    "scale_type": "str",
    "n_annotators": "int64",
    "n_items": "int64",  # items with at least one rating
    "n_items_pairable": "int64",  # items with >= 2 ratings: what alpha uses
    "n_items_complete": "int64",  # items rated by every annotator: what Fleiss' kappa uses
    "fleiss_kappa": "float64",
    "krippendorff_alpha": "float64",
    "alpha_level": "str",  # 'interval' for scores, 'nominal' for labels
    "reason": "str",
}

DISPUTED_SCHEMA: dict[str, str] = {
    "item_id": "str",
    "dimension": "str",
    "n_ratings": "int64",
    "sd": "float64",
    "mean_score": "float64",
}

FINAL_SCORES_SCHEMA: dict[str, str] = {
    "item_id": "str",
    "dimension": "str",
    "n_ratings": "int64",
    "mean_score": "float64",  # AccessEval Eq. 2: the simple mean of the annotators' scores
    "sd": "float64",  # sample sd (ddof=1)
    "disputed": "bool",  # sd > threshold (Eq. 3)
    "reason": "str",
}

SHORTFALL_SCHEMA: dict[str, str] = {
    "domain": "str",
    "requested": "int64",
    "available": "int64",
    "sampled": "int64",
    "shortfall": "int64",
}


# --------------------------------------------------------------------------- preparation


def _scale_for(dimension: str, values: pd.Series, scales: Mapping[str, dict]) -> dict:
    if dimension in scales:
        return dict(scales[dimension])
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.notna().all():
        return {"type": "score"}
    return {"type": "label", "values": sorted(values.astype("str").unique()), "ordered": False}


def _prepare(ratings: pd.DataFrame, kinds: Sequence[str] | None = None) -> pd.DataFrame:
    require_columns(ratings, ["item_id", "dimension", "rater_id", "value"], "ratings")
    df = ratings.copy()
    if "rater_kind" not in df.columns:
        df["rater_kind"] = "human"
    df["rater_kind"] = df["rater_kind"].fillna("human")
    df = df[
        df["value"].notna()
        & df["item_id"].notna()
        & df["rater_id"].notna()
        & df["dimension"].notna()
    ]
    df = df[df["value"].astype("str").str.strip() != ""]
    if kinds is not None:
        df = df[df["rater_kind"].isin(list(kinds))]
    for col in ("item_id", "dimension", "rater_id", "rater_kind"):
        df[col] = df[col].astype("str")
    # a repeated (item, dimension, rater) rating: the last row wins
    return df.drop_duplicates(["item_id", "dimension", "rater_id"], keep="last").reset_index(
        drop=True
    )


def _encode(values: pd.Series, scale: dict) -> tuple[pd.Series, list | None]:
    """Numeric values for the statistics, and the category list for kappa (None: not categorical).

    Scores: the numbers; categories = every integer of the scale (min..max, or the
    observed range) when all values are whole numbers, else None.
    Labels: codes 0..k-1 in scale order (unlisted labels appended, sorted).
    """
    if scale["type"] == "score":
        x = pd.to_numeric(values, errors="coerce").astype(float)
        v = x.dropna()
        if len(v) and np.allclose(v, np.round(v)):
            lo = int(scale["min"]) if "min" in scale else int(v.min())
            hi = int(scale["max"]) if "max" in scale else int(v.max())
            lo, hi = min(lo, int(v.min())), max(hi, int(v.max()))
            x = x.round()
            return x, list(range(lo, hi + 1))
        return x, None
    listed = [str(v) for v in scale.get("values", [])]
    extra = sorted(set(values.astype("str")) - set(listed))
    order = listed + extra
    codes = values.astype("str").map({v: i for i, v in enumerate(order)}).astype(float)
    return codes, list(range(len(order)))


def _ordinal(scale: dict) -> bool:
    return scale["type"] == "score" or bool(scale.get("ordered", False))


def kind_pair(kind_a: str, kind_b: str) -> str:
    """'human_vs_judge', 'detector_vs_judge', 'judge_vs_judge', ... (order: human, detector, judge)."""
    rank = {k: i for i, k in enumerate(RATER_KINDS)}
    a, b = sorted([kind_a, kind_b], key=lambda k: (rank.get(k, len(rank)), k))
    return f"{a}_vs_{b}"


# --------------------------------------------------------------------------- pairwise


def _kappa(
    a: np.ndarray, b: np.ndarray, labels: list, weights: str | None
) -> tuple[float, str | None]:
    res, warns, err = quiet_call(cohen_kappa_score, a, b, labels=labels, weights=weights)
    k = finite(res) if res is not None else float("nan")
    if np.isnan(k):
        if len(np.unique(np.concatenate([a, b]))) == 1:
            return k, "one category only (both raters gave the same single value)"
        return k, str(err) if err else (warns[0] if warns else "undefined")
    return k, None


def _pair_stats(
    a: np.ndarray, b: np.ndarray, scale: dict, labels: list | None, name_a: str, name_b: str
) -> tuple[dict, Reasons]:
    nan = float("nan")
    n = int(a.size)
    why = Reasons()
    row = {
        "n_items": n,
        "spearman_rho": nan,
        "spearman_p": nan,
        "spearman_method": None,
        "cohen_kappa": nan,
        "kappa_linear": nan,
        "kappa_quadratic": nan,
        "accuracy": nan,
    }
    if n == 0:
        why.add("all", "no items rated by both")
        return row, why
    row["accuracy"] = float(np.mean(np.isclose(a, b, rtol=0, atol=1e-9)))
    ordinal = _ordinal(scale)
    if n < 2:
        why.add("spearman", "n<2")
        why.add("kappa", "n<2")
        return row, why

    # Spearman: ordinal dimensions only, both raters must vary
    if not ordinal:
        why.add("spearman", "nominal labels: no rank correlation")
    elif is_zero_sd(a) or is_zero_sd(b):
        const = [r for r, v in ((name_a, a), (name_b, b)) if is_zero_sd(v)]
        why.add("spearman", f"constant ratings from {', '.join(const)}")
    else:
        res, warns, err = quiet_call(stats.spearmanr, a, b)
        if res is not None:
            row["spearman_rho"], row["spearman_p"] = finite(res.statistic), finite(res.pvalue)
        if np.isnan(row["spearman_rho"]):
            why.add("spearman", str(err) if err else (warns[0] if warns else "undefined"))
        elif n < 3:
            row["spearman_p"] = nan
            why.add("spearman_p", "n<3")
        elif n <= EXACT_SPEARMAN_MAX_N:
            # few items: the exact permutation p, not the t approximation
            row["spearman_p"], row["spearman_method"] = spearman_exact_p(a, b), SPEARMAN_EXACT
        elif np.isnan(row["spearman_p"]):
            why.add("spearman_p", warns[0] if warns else "undefined")
        else:
            row["spearman_method"] = SPEARMAN_T

    # Cohen's kappa: categorical values; weighted variants for ordinal scales
    if labels is None:
        why.add("kappa", "non-integer scores: kappa needs categories")
        return row, why
    ai, bi = a.astype(int), b.astype(int)
    row["cohen_kappa"], r = _kappa(ai, bi, labels, None)
    if r:
        why.add("cohen_kappa", r)
    if ordinal:
        for col, w in (("kappa_linear", "linear"), ("kappa_quadratic", "quadratic")):
            row[col], r = _kappa(ai, bi, labels, w)
            if r:
                why.add(col, r)
    else:
        why.add("weighted_kappa", "nominal labels: no weighted kappa")
    return row, why


def pairwise_agreement(ratings: pd.DataFrame, scales: Mapping[str, dict] = SCALES) -> pd.DataFrame:
    """One row per unordered pair of raters and dimension (PAIRWISE_SCHEMA).

    Items count when both raters rated them (missing ratings are dropped pairwise).
    rater_a is the rater of the earlier kind (human, detector, judge), then by id.
    """
    df = _prepare(ratings)
    rows = []
    rank = {k: i for i, k in enumerate(RATER_KINDS)}
    for dim, g in df.groupby("dimension", sort=True):
        scale = _scale_for(dim, g["value"], scales)
        codes, labels = _encode(g["value"], scale)
        g = g.assign(_x=codes.to_numpy())
        g = g[g["_x"].notna()]
        wide = g.pivot(index="item_id", columns="rater_id", values="_x")
        kinds = g.groupby("rater_id")["rater_kind"].first().to_dict()
        raters = sorted(wide.columns, key=lambda r: (rank.get(kinds[r], len(rank)), kinds[r], r))
        for ra, rb in itertools.combinations(raters, 2):
            both = wide[[ra, rb]].dropna()
            row, why = _pair_stats(
                both[ra].to_numpy(float), both[rb].to_numpy(float), scale, labels, ra, rb
            )
            row.update(
                dimension=dim,
                scale_type=scale["type"],
                rater_a=ra,
                rater_b=rb,
                kind_a=kinds[ra],
                kind_b=kinds[rb],
                kind_pair=kind_pair(kinds[ra], kinds[rb]),
                reason=why.text,
            )
            rows.append(row)
    return typed_frame(rows, PAIRWISE_SCHEMA)


# --------------------------------------------------------------------------- many annotators


def annotator_agreement(
    ratings: pd.DataFrame,
    scales: Mapping[str, dict] = SCALES,
    kinds: Sequence[str] = ("human",),
) -> pd.DataFrame:
    """Per dimension, over the raters of `kinds`: Fleiss' kappa and Krippendorff's alpha.

    Fleiss' kappa (statsmodels) treats every distinct value as a category and needs
    the same raters on every item: it uses only the items rated by all annotators
    (n_items_complete). Krippendorff's alpha (krippendorff package) takes missing
    ratings natively (NaN) and uses every item with at least two ratings; level
    'interval' for scores, 'nominal' for labels.
    """
    df = _prepare(ratings, kinds)
    rows = []
    for dim, g in df.groupby("dimension", sort=True):
        scale = _scale_for(dim, g["value"], scales)
        codes, _ = _encode(g["value"], scale)
        g = g.assign(_x=codes.to_numpy())
        g = g[g["_x"].notna()]
        wide = (
            g.pivot(index="item_id", columns="rater_id", values="_x")
            .sort_index(axis=0)
            .sort_index(axis=1)
        )
        per_item = wide.notna().sum(axis=1)
        why = Reasons()
        level = "interval" if scale["type"] == "score" else "nominal"
        row = {
            "dimension": dim,
            "rater_kind": ",".join(kinds),
            "scale_type": scale["type"],
            "n_annotators": int(wide.shape[1]),
            "n_items": int((per_item >= 1).sum()),
            "n_items_pairable": int((per_item >= 2).sum()),
            "n_items_complete": int((per_item == wide.shape[1]).sum()) if wide.shape[1] else 0,
            "fleiss_kappa": float("nan"),
            "krippendorff_alpha": float("nan"),
            "alpha_level": level,
        }

        # Fleiss' kappa on complete items
        complete = wide[per_item == wide.shape[1]]
        if wide.shape[1] < 2:
            why.add("fleiss_kappa", "fewer than 2 annotators")
        elif len(complete) < 2:
            why.add("fleiss_kappa", "fewer than 2 items rated by all annotators")
        elif len(np.unique(complete.to_numpy())) < 2:
            why.add("fleiss_kappa", "all ratings identical")
        else:
            table, _ = aggregate_raters(complete.to_numpy())
            res, warns, err = quiet_call(fleiss_kappa, table, method="fleiss")
            row["fleiss_kappa"] = finite(res)
            if np.isnan(row["fleiss_kappa"]):
                why.add("fleiss_kappa", str(err) if err else (warns[0] if warns else "undefined"))

        # Krippendorff's alpha on pairable items, missing ratings as NaN
        pairable = wide[per_item >= 2]
        if wide.shape[1] < 2:
            why.add("krippendorff_alpha", "fewer than 2 annotators")
        elif len(pairable) == 0:
            why.add("krippendorff_alpha", "no item rated by 2 or more annotators")
        elif len(np.unique(pairable.stack().to_numpy())) < 2:
            why.add("krippendorff_alpha", "all ratings identical")
        else:
            res, warns, err = quiet_call(
                krippendorff.alpha,
                reliability_data=pairable.T.to_numpy(float),
                level_of_measurement=level,
            )
            row["krippendorff_alpha"] = finite(res)
            if np.isnan(row["krippendorff_alpha"]):
                why.add(
                    "krippendorff_alpha", str(err) if err else (warns[0] if warns else "undefined")
                )
        row["reason"] = why.text
        rows.append(row)
    return typed_frame(rows, ANNOTATOR_SCHEMA)


# --------------------------------------------------------------------------- final scores


def final_scores(
    ratings: pd.DataFrame,
    sd_threshold: float = DISPUTE_SD,
    kinds: Sequence[str] = ("human",),
    scales: Mapping[str, dict] | None = None,
) -> pd.DataFrame:
    """Every (item, score dimension): the mean of the annotators' scores (AccessEval Eq. 2),
    their sample sd and whether the item is disputed (sd > sd_threshold, Eq. 3).

    Only numeric ratings count (label dimensions, and with `scales` every non-score
    dimension, are skipped). An item with one rating has no sd: not disputed, with a reason.
    """
    df = _prepare(ratings, kinds)
    if scales is not None:
        score_dims = [d for d, s in scales.items() if s.get("type") == "score"]
        df = df[df["dimension"].isin(score_dims)]
    df = df.assign(_x=pd.to_numeric(df["value"], errors="coerce").astype(float))
    df = df[df["_x"].notna()]
    rows = []
    for (item, dim), g in df.groupby(["item_id", "dimension"], sort=True):
        x = g["_x"].to_numpy(float)
        sd = float(np.std(x, ddof=1)) if x.size >= 2 else float("nan")
        rows.append(
            {
                "item_id": item,
                "dimension": dim,
                "n_ratings": int(x.size),
                "mean_score": float(np.mean(x)),
                "sd": sd,
                "disputed": bool(sd > sd_threshold) if x.size >= 2 else False,
                "reason": None if x.size >= 2 else "sd: n<2 (one rating), not disputed",
            }
        )
    return typed_frame(rows, FINAL_SCORES_SCHEMA)


def disputed_items(
    ratings: pd.DataFrame,
    sd_threshold: float = DISPUTE_SD,
    kinds: Sequence[str] = ("human",),
    scales: Mapping[str, dict] | None = None,
) -> pd.DataFrame:
    """The (item, dimension) rows of final_scores whose sd > sd_threshold (DISPUTED_SCHEMA)."""
    fs = final_scores(ratings, sd_threshold=sd_threshold, kinds=kinds, scales=scales)
    return typed_frame(fs[fs["disputed"]], DISPUTED_SCHEMA)


# --------------------------------------------------------------------------- annotation sample


def stratified_sample(
    items: pd.DataFrame,
    size_per_domain: int,
    seed: int = 0,
    id_col: str = "item_id",
    domain_col: str = "domain",
    group_col: str = "disability_id",
) -> pd.DataFrame:
    """A sample of `size_per_domain` items per domain, balanced over disabilities within it.

    Within a domain, items are grouped by `group_col` (a missing value is its own
    group, e.g. neutral responses); the groups are visited round-robin in a seeded
    shuffled order, each yielding its next item in a seeded shuffled order, until
    the domain's quota is met or the items run out. Group sizes in the sample thus
    differ by at most one, except where a group has too few items. Deterministic
    for a seed and independent of the input row order. A domain with fewer items
    than requested is taken whole; `domain_shortfall` says by how many it falls short
    (see also sample_shortfall()).

    Returns the sampled rows with every input column plus sample_order (1.. within
    the domain), domain_available and domain_shortfall, sorted by domain and sample_order.
    """
    require_columns(items, [id_col, domain_col, group_col], "stratified_sample")
    extra = {"sample_order": "int64", "domain_available": "int64", "domain_shortfall": "int64"}
    if items.empty:
        out = items.copy()
        for c, t in extra.items():
            out[c] = pd.Series([], dtype=t)
        return out
    df = items.drop_duplicates(id_col).sort_values(id_col, kind="mergesort").reset_index(drop=True)
    parts = []
    for dom, g in df.groupby(domain_col, sort=True, dropna=False):
        rng = np.random.default_rng(stable_seed(seed, dom))
        groups = {}
        keys = g[group_col].astype(object).where(g[group_col].notna(), "\x00none")
        for k in sorted(keys.unique(), key=str):
            members = g.index[keys == k].to_numpy()
            groups[k] = list(rng.permutation(members))
        order = [list(groups)[i] for i in rng.permutation(len(groups))]
        picked: list[int] = []
        while len(picked) < size_per_domain and any(groups[k] for k in order):
            for k in order:
                if groups[k] and len(picked) < size_per_domain:
                    picked.append(groups[k].pop(0))
        part = df.loc[picked].copy()
        part["sample_order"] = np.arange(1, len(picked) + 1)
        part["domain_available"] = len(g)
        part["domain_shortfall"] = max(0, size_per_domain - len(g))
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    for c, t in extra.items():
        out[c] = out[c].astype(t)
    return out


def sample_shortfall(
    items: pd.DataFrame,
    size_per_domain: int,
    domains: Sequence[str] | None = None,
    domain_col: str = "domain",
    id_col: str = "item_id",
) -> pd.DataFrame:
    """Per domain (those in `items`, plus any listed in `domains`): requested, available,
    sampled and shortfall (requested - sampled) for stratified_sample with that size."""
    avail = (
        items.drop_duplicates(id_col).groupby(domain_col).size()
        if len(items)
        else pd.Series(dtype="int64")
    )
    names = sorted(set(map(str, avail.index)) | set(domains or []))
    avail.index = avail.index.map(str)
    rows = []
    for d in names:
        a = int(avail.get(d, 0))
        s = min(a, size_per_domain)
        rows.append(
            {
                "domain": d,
                "requested": size_per_domain,
                "available": a,
                "sampled": s,
                "shortfall": size_per_domain - s,
            }
        )
    return typed_frame(rows, SHORTFALL_SCHEMA)


# --------------------------------------------------------------------------- import validation

_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


def normalize_labels(df: pd.DataFrame, scales: Mapping[str, dict] = SCALES) -> pd.DataFrame:
    """A copy with label values mapped onto their scale's spelling: trimmed and
    case-insensitive ('yes' -> 'Yes'); for a No/Yes scale also true/false, 1/0, y/n.
    Values that match nothing are left as they are (validate_annotations reports them)."""
    out = df.copy()
    if "value" not in out.columns or "dimension" not in out.columns:
        return out
    for dim, scale in scales.items():
        if scale.get("type") != "label":
            continue
        allowed = [str(v) for v in scale.get("values", [])]
        lookup = {v.lower(): v for v in allowed}
        if sorted(lookup) == ["no", "yes"]:
            lookup.update({t: lookup["yes"] for t in _TRUE} | {f: lookup["no"] for f in _FALSE})
        mask = (out["dimension"] == dim) & out["value"].notna()
        if mask.any():
            out["value"] = out["value"].astype(object)
            out.loc[mask, "value"] = [
                lookup.get(str(v).strip().lower(), v) for v in out.loc[mask, "value"]
            ]
    return out


def validate_annotations(
    df: pd.DataFrame, scales: Mapping[str, dict] = SCALES, max_per_kind: int = 20
) -> list[str]:
    """Problems of an annotation import, as readable messages ([] when it is fine).

    Checks: required columns (item_id, dimension, rater_id, value); missing ids;
    unknown dimension; unknown rater_kind; a score that is not a number, outside
    [min, max], or not whole on an integer scale; a label outside its scale's values;
    duplicate (item_id, rater_id, dimension) rows. A blank value is a missing
    rating (not rated), not a problem. Rows are numbered from 1 in frame order;
    at most `max_per_kind` messages per kind of problem, then a count.
    """
    missing = [c for c in ("item_id", "dimension", "rater_id", "value") if c not in df.columns]
    if missing:
        return [
            f"missing column(s): {', '.join(missing)} (need item_id, dimension, rater_id, value)"
        ]
    found: dict[str, list[str]] = {}

    def report(kind: str, msg: str) -> None:
        found.setdefault(kind, []).append(msg)

    def blank(v) -> bool:
        return (
            v is None
            or (isinstance(v, float) and np.isnan(v))
            or v is pd.NA
            or str(v).strip() == ""
        )

    has_kind = "rater_kind" in df.columns
    for pos, rec in enumerate(df.to_dict("records"), start=1):
        ids_missing = [c for c in ("item_id", "rater_id", "dimension") if blank(rec[c])]
        if ids_missing:
            report("ids", f"row {pos}: missing {', '.join(ids_missing)}")
        if has_kind and not blank(rec["rater_kind"]) and rec["rater_kind"] not in RATER_KINDS:
            report(
                "kind",
                f"row {pos}: unknown rater_kind {rec['rater_kind']!r} (use {', '.join(RATER_KINDS)})",
            )
        dim = rec["dimension"]
        if blank(dim):
            continue
        if dim not in scales:
            report(
                "dimension",
                f"row {pos}: unknown dimension {dim!r} (known: {', '.join(sorted(scales))})",
            )
            continue
        value = rec["value"]
        if blank(value):
            continue
        scale = scales[dim]
        if scale.get("type") == "score":
            x = finite(value) if not isinstance(value, bool) else float("nan")
            if np.isnan(x):
                report("value", f"row {pos}: {dim} score {value!r} is not a number")
                continue
            lo, hi = scale.get("min"), scale.get("max")
            if (lo is not None and x < lo) or (hi is not None and x > hi):
                report("value", f"row {pos}: {dim} score {value!r} is outside [{lo}, {hi}]")
            elif scale.get("integer") and x != round(x):
                report("value", f"row {pos}: {dim} score {value!r} is not a whole number")
        else:
            allowed = [str(v) for v in scale.get("values", [])]
            if str(value) not in allowed:
                hint = ""
                if str(value).strip().lower() in {a.lower() for a in allowed}:
                    hint = " (spelling differs; normalize_labels fixes case and spaces)"
                report(
                    "value",
                    f"row {pos}: {dim} label {value!r} is not one of {', '.join(allowed)}{hint}",
                )
    keyed = df[["item_id", "rater_id", "dimension"]].astype("str")
    dup = keyed.duplicated(keep=False)
    if dup.any():
        for key, _g in keyed[dup].groupby(["item_id", "rater_id", "dimension"], sort=True):
            rows = ", ".join(
                str(i + 1)
                for i in np.flatnonzero(dup.to_numpy() & (keyed == list(key)).all(axis=1))
            )
            report(
                "duplicate",
                f"duplicate rating of item {key[0]!r} by {key[1]!r} on {key[2]!r} (rows {rows})",
            )
    problems: list[str] = []
    for kind in ("ids", "kind", "dimension", "value", "duplicate"):
        msgs = found.get(kind, [])
        problems.extend(msgs[:max_per_kind])
        if len(msgs) > max_per_kind:
            problems.append(f"... and {len(msgs) - max_per_kind} more {kind} problem(s)")
    return problems
