"""The headline an audit ends with in the terminal: per model, arm and metric, the pairs, the
degradation rate, the mean shift with its CI, the Holm-adjusted p of the query-level test and
whether the shift is significant (column `significant` of the `significance` mart: that p below
0.05 and a CI that excludes 0), read from the marts (nothing computed here)."""

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
    "degraded %",
    "mean shift [95% CI]",
    "p (Holm)",
    "significant",
)


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
    for model, arm, metric, n, pct, diff, low, high, p, significant in rows:
        shift = "n/a" if diff is None else f"{diff:+.3f} [{_num(low, 3)}, {_num(high, 3)}]"
        called = "n/a" if significant is None else ("yes" if significant else "no")
        out.append((model, arm, metric, str(n), _num(pct, 1), shift, _num(p, 3), called))
    return out


def headline(warehouse: str | Path) -> str:
    """The headline table as text, columns aligned; one line saying so when no pair was scored."""
    rows = headline_rows(warehouse)
    if not rows:
        return "No pairs were scored yet: the marts are empty."
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)
