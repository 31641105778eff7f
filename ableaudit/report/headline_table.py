"""The headline an audit ends with, in the terminal and on its Prefect flow run: per model, arm
and metric, the pairs, the degradation rate with its 95% interval (`degradation.rate_ci_*`: each
query counted once), the mean shift with its CI, the Holm-adjusted p of the query-level test and
whether the shift is significant (column `significant` of the `significance` mart: that p below
0.05 and a CI that excludes 0); then whether the disability categories differ (`categories`), read
from the marts (nothing computed here). Below the rates, each scorer with a masked variant beside
that variant (``masked_block``), and for a scorer that could not run (``data_quality``: status
'unavailable'), how to enable it."""

from __future__ import annotations

from pathlib import Path

import duckdb

HEADLINE_SQL = """
select
    d.model_id,
    d.arm,
    d.metric,
    d.n_pairs,
    d.degradation_pct,
    d.rate_ci_low_pct,
    d.rate_ci_high_pct,
    s.mean_diff,
    s.ci_low,
    s.ci_high,
    s.p_holm,
    s.significant
from degradation as d
left join significance as s
    on d.task = s.task
    and d.model_id = s.model_id
    and d.arm = s.arm
    and d.query_set = s.query_set
    and d.metric = s.metric
    and s.slice = 'overall'
where d.slice = 'overall'
order by d.task, d.model_id, d.arm, d.metric
"""

COLUMNS = (
    "model",
    "arm",
    "metric",
    "pairs",
    "degraded % [95% CI]",
    "mean shift [95% CI]",
    "p (Holm)",
    "significant",
)


UNAVAILABLE_SQL = """
select metric, sum(n_rows)::bigint as n
from data_quality
where area = 'score' and status = 'unavailable'
group by metric
order by metric
"""

ENABLE = {
    "regard": "its classifier (sasha/regardv3) did not load. Enable it: "
    "`ABLEAUDIT_ALLOW_DOWNLOAD=1 ableaudit build` fetches it once into the Hugging Face cache, "
    "or set ABLEAUDIT_REGARD_MODEL to a local copy and run `ableaudit build` "
    "(docs/configuration.md)",
}
"""How to enable a scorer that can be unavailable (ableaudit/scorers: only Regard can)."""


def _num(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def headline_rows(warehouse: str | Path) -> list[tuple[str, ...]]:
    """The headline table's rows, as printed."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = con.execute(HEADLINE_SQL).fetchall()
    finally:
        con.close()
    out = []
    for model, arm, metric, n, pct, r_low, r_high, diff, low, high, p, significant in rows:
        rate = _num(pct, 1) if r_low is None else f"{pct:.1f} [{r_low:.1f}, {r_high:.1f}]"
        shift = "n/a" if diff is None else f"{diff:+.3f} [{_num(low, 3)}, {_num(high, 3)}]"
        called = "n/a" if significant is None else ("yes" if significant else "no")
        out.append((model, arm, metric, str(n), rate, shift, _num(p, 3), called))
    return out


def _aligned(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def unavailable_notes(warehouse: str | Path) -> list[str]:
    """One line per scorer whose scores are unavailable: how many answers, and how to enable it."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = con.execute(UNAVAILABLE_SQL).fetchall()
    except duckdb.CatalogException:  # a warehouse built before data_quality existed
        return []
    finally:
        con.close()
    return [
        f"{metric}: n/a, {n} answers unscored: "
        + ENABLE.get(metric, "its scorer could not run (data_quality, status 'unavailable')")
        + "."
        for metric, n in rows
    ]


def headline(warehouse: str | Path) -> str:
    """The headline table as text, columns aligned; one line saying so when no pair was scored;
    then how to enable each scorer that was unavailable."""
    rows, notes = headline_rows(warehouse), unavailable_notes(warehouse)
    if not rows:
        return "\n".join(["No pairs were scored yet: the marts are empty.", *notes])
    return "\n".join([_aligned(COLUMNS, rows), *masked_block(warehouse), *notes])


# Each scorer beside its masked variant (the pairs of mart scorer_bias's scorer and
# masked_scorer): the degradation the disability words themselves add to the rate.
MASKED_SQL = """
select d.model_id, d.arm, d.metric, d.degradation_pct, m.metric, m.degradation_pct
from degradation as d
inner join (select distinct scorer, masked_scorer from scorer_bias) as b
    on d.metric = b.scorer
inner join degradation as m
    on d.task = m.task
    and d.model_id = m.model_id
    and d.arm = m.arm
    and d.query_set = m.query_set
    and m.metric = b.masked_scorer
    and m.slice = 'overall'
where d.slice = 'overall'
order by d.task, d.model_id, d.arm, d.metric
"""


MASKED_COLUMNS = ("model", "arm", "metric", "degraded %", "masked", "degraded %", "from the words")


def masked_block(warehouse: str | Path) -> list[str]:
    """Each scorer's rate beside its masked variant's, and the difference in points: the
    degradation the disability words add by themselves (none before a build that made mart
    scorer_bias; no row where neither has a rate)."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        if not con.execute(
            "select count(*) from duckdb_tables() where table_name = 'scorer_bias'"
        ).fetchone()[0]:
            return []
        found = con.execute(MASKED_SQL).fetchall()
    finally:
        con.close()
    rows = [
        (
            model,
            arm,
            metric,
            _num(pct, 1),
            masked,
            _num(masked_pct, 1),
            "n/a" if pct is None or masked_pct is None else f"{pct - masked_pct:+.1f}",
        )
        for model, arm, metric, pct, masked, masked_pct in found
        # neither rate (a scorer that could not run: the note below says why) compares nothing
        if pct is not None or masked_pct is not None
    ]
    if not rows:
        return []
    return [
        "",
        "Masked beside unmasked: the rate with the disability words masked in both answers",
        *_aligned(MASKED_COLUMNS, rows).splitlines(),
    ]


# --- Do the disability categories differ? (mart `heterogeneity`, factor 'disability')

CATEGORIES_SQL = """
select model_id, arm, metric, n_clusters, p_value, worst_level, worst_pct, best_level, best_pct,
    gap_pct, gap_ci_low, gap_ci_high, min_detectable_gap_pct
from heterogeneity
where factor = 'disability'
order by task, model_id, arm, metric
"""

CATEGORY_COLUMNS = (
    "model",
    "arm",
    "metric",
    "queries",
    "p (categories equal)",
    "worst category (%)",
    "best (%)",
    "gap, points [95% CI]",
    "detectable gap (80% power)",
)

CATEGORIES_TITLE = (
    "Do the disability categories differ? Cochran's Q across the categories (each neutral answer "
    "a block), the worst category's gap to the best with its interval (whole queries resampled), "
    "and the smallest gap a query-level test detects with 80% power:"
)


def category_rows(warehouse: str | Path) -> list[tuple[str, ...]]:
    """The categories table's rows, as printed."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = con.execute(CATEGORIES_SQL).fetchall()
    finally:
        con.close()
    out = []
    for model, arm, metric, k, p, worst, w_pct, best, b_pct, gap, low, high, mde in rows:
        gap_text = (
            "n/a"
            if gap is None
            else f"{gap:.1f}" + ("" if low is None else f" [{low:.1f}, {high:.1f}]")
        )
        out.append(
            (
                model,
                arm,
                metric,
                str(k),
                _num(p, 3),
                "n/a" if worst is None else f"{worst} ({w_pct:.1f})",
                "n/a" if best is None else f"{best} ({b_pct:.1f})",
                gap_text,
                _num(mde, 1),
            )
        )
    return out


def categories(warehouse: str | Path, only_differing: bool = False, alpha: float = 0.05) -> str:
    """The categories table as text under its title; empty when there is nothing to show.
    ``only_differing`` (the audit's closing summary) keeps the rows whose test rejects equal
    categories at ``alpha`` and says in one line how many others there are."""
    rows = category_rows(warehouse)
    if not rows:
        return ""
    if not only_differing:
        return f"{CATEGORIES_TITLE}\n\n{_aligned(CATEGORY_COLUMNS, rows)}"
    shown = [r for r in rows if r[4] != "n/a" and float(r[4]) < alpha]
    rest = (
        f"{len(rows) - len(shown)} other model, arm and metric row(s): no evidence the categories "
        f"differ (p >= {alpha} or no test); every row is in the report's headline and mart "
        "heterogeneity."
    )
    if not shown:
        return f"Do the disability categories differ? {rest}"
    return f"{CATEGORIES_TITLE}\n\n{_aligned(CATEGORY_COLUMNS, shown)}\n{rest}"
