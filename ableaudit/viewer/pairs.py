"""Searching the pairs: the filters of the pairs page, as SQL over ``pair_details``.

``pair_details`` holds one row per pair (a disability-aware answer and its neutral answer),
with both texts and, per text metric, both scores, the delta, whether the pair counts in the
metric's rate and whether it is degraded (the rule of ``int_pair_scores``, read here, never
recomputed). A filter value is always a bound parameter; a metric's columns are named only
after the metric was found among the copy's columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ableaudit.errors import did_you_mean
from ableaudit.viewer.sources import Reader

PAGE_SIZE = 20
MAX_QUERY = 200
FIELDS = ("model", "arm", "metric", "domain", "disability", "outcome", "q", "page")
COLUMN_OF = {"model": "model_id", "arm": "arm", "domain": "domain", "disability": "disability_id"}
METRIC_OUTCOMES = {
    "degraded": "degraded",
    "not_degraded": "counted, not degraded",
    "not_counted": "not counted in the rate",
}
JUDGE_DIMENSIONS = ("interpret", "stereotype", "framing", "abstain")
OUTCOMES = {
    **METRIC_OUTCOMES,
    "refused": "disability-aware answer refused",
    **{f"{d}_yes": f"a contrastive judge said {d} Yes" for d in JUDGE_DIMENSIONS},
}


@dataclass(frozen=True)
class Filters:
    """The pairs page's query string, checked."""

    model: str = ""
    arm: str = ""
    metric: str = ""
    domain: str = ""
    disability: str = ""
    outcome: str = ""
    q: str = ""
    page: int = 1

    @classmethod
    def parse(cls, query: Mapping[str, list[str]]) -> Filters:
        got = {k: (query.get(k) or [""])[-1].strip() for k in FIELDS}
        try:
            page = max(1, int(got.pop("page") or 1))
        except ValueError:
            page = 1
        got["q"] = got["q"][:MAX_QUERY]
        return cls(page=page, **got)

    def query(self, **changes: Any) -> dict[str, str]:
        """The filters as a query string's fields (empty ones left out), with ``changes``."""
        values = {k: str(getattr(replace(self, **changes), k)) for k in FIELDS}
        return {k: v for k, v in values.items() if v and not (k == "page" and v == "1")}


@dataclass
class Options:
    """What each filter can be set to, from the copy."""

    models: list[str] = field(default_factory=list)
    arms: list[str] = field(default_factory=list)
    domains: list[str] = field(default_factory=list)
    disabilities: list[str] = field(default_factory=list)
    metrics: list[tuple[str, str]] = field(default_factory=list)
    """(metric, display name) of every text metric with its columns in pair_details."""
    directions: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    """One page of matching pairs."""

    filters: Filters
    total: int
    pairs: list[dict[str, Any]]
    notes: list[str]
    """Filter values the copy does not know, said in a sentence each."""

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


def text_metrics(reader: Reader) -> list[str]:
    """The metrics with the six columns of pair_details (neutral_<m>, disability_<m>, <m>_delta,
    <m>_included, <m>_exclusion_reason, <m>_degraded), in the table's order."""
    cols = reader.columns("main.pair_details")
    have = set(cols)
    suffixes = ("_delta", "_included", "_exclusion_reason", "_degraded")
    return [
        c[len("neutral_") :]
        for c in cols
        if c.startswith("neutral_")
        and f"disability_{c[len('neutral_') :]}" in have
        and all(c[len("neutral_") :] + s in have for s in suffixes)
    ]


def options(reader: Reader) -> Options:
    """Every value of each filter in the copy."""
    if not reader.has("main.pair_details"):
        return Options()
    distinct = {
        name: reader.values(
            f"select distinct {col} from pair_details where {col} is not null order by 1"
        )
        for name, col in COLUMN_OF.items()
    }
    metrics = text_metrics(reader)
    names, directions = {}, {}
    if reader.has("main.stg_seeds__metrics"):
        for r in reader.rows("select metric, display_name, direction from stg_seeds__metrics"):
            names[r["metric"]] = r["display_name"] or r["metric"]
            directions[r["metric"]] = r["direction"]
    arms = distinct["arm"]
    return Options(
        models=distinct["model"],
        arms=(["baseline"] if "baseline" in arms else []) + [a for a in arms if a != "baseline"],
        domains=distinct["domain"],
        disabilities=distinct["disability"],
        metrics=[(m, names.get(m, m)) for m in metrics],
        directions={m: directions.get(m, "higher_is_better") for m in metrics},
    )


def _outcome_sql(outcome: str, metrics: list[str]) -> str | None:
    """The condition of an outcome, over ``metrics`` (one chosen, or any of them)."""
    if outcome in METRIC_OUTCOMES:
        if not metrics:
            return "false"
        degraded = " or ".join(f"coalesce({m}_degraded, false)" for m in metrics)
        included = " or ".join(f"{m}_included" for m in metrics)
        return {
            "degraded": f"({degraded})",
            "not_degraded": f"(({included}) and not ({degraded}))",
            "not_counted": f"not ({included})",
        }[outcome]
    if outcome == "refused":
        return "coalesce(disability_refused, false)"
    if outcome.endswith("_yes") and outcome[: -len("_yes")] in JUDGE_DIMENSIONS:
        return f"n_contrastive_{outcome} > 0"
    return None


def search(reader: Reader, filters: Filters, opts: Options) -> Result:
    """The pairs matching ``filters``, one page of them, worst first on a chosen metric."""
    notes: list[str] = []
    if not reader.has("main.pair_details"):
        return Result(filters, 0, [], ["The published copy has no pair_details yet: build it."])
    known = {
        "model": opts.models,
        "arm": opts.arms,
        "domain": opts.domains,
        "disability": opts.disabilities,
    }
    where, params = [], []
    for name, col in COLUMN_OF.items():
        value = getattr(filters, name)
        if value:
            where.append(f"{col} = ?")
            params.append(value)
            if value not in known[name]:
                hint = did_you_mean(value, known[name])
                notes.append(f"No {name} {value!r} in the published copy{hint or '.'}")
    metric_names = [m for m, _ in opts.metrics]
    metric = filters.metric if filters.metric in metric_names else ""
    if filters.metric and not metric:
        hint = did_you_mean(filters.metric, metric_names)
        notes.append(
            f"No text metric {filters.metric!r} in pair_details{hint or '.'} Every metric is shown."
        )
    if filters.outcome:
        condition = _outcome_sql(filters.outcome, [metric] if metric else metric_names)
        if condition is None:
            notes.append(f"No outcome {filters.outcome!r}; choose one of the list.")
        else:
            where.append(condition)
    if filters.q:
        where.append(
            "(contains(lower(coalesce(neutral_response_text, '')), lower(?)) "
            "or contains(lower(coalesce(disability_response_text, '')), lower(?)))"
        )
        params += [filters.q, filters.q]
    clause = (" where " + " and ".join(where)) if where else ""
    total = reader.values(f"select count(*) from pair_details{clause}", params)[0]
    keys = "model_id, arm, domain, disability_id, query_id, temperature, sample_index, pair_id"
    if metric:
        worst = "asc" if opts.directions.get(metric) != "lower_is_better" else "desc"
        order = f"{metric}_delta {worst} nulls last, {keys}"
    else:
        order = keys
    offset = (filters.page - 1) * PAGE_SIZE
    rows = reader.rows(
        f"select * from pair_details{clause} order by {order} limit {PAGE_SIZE} offset {offset}",
        params,
    )
    shown = [metric] if metric else metric_names
    pairs = [_pair(r, shown, dict(opts.metrics)) for r in rows]
    return Result(filters, int(total), pairs, notes)


def _pair(row: dict[str, Any], metrics: list[str], names: dict[str, str]) -> dict[str, Any]:
    """A pair as the page shows it: its keys, texts and one score row per metric."""
    scores = []
    for m in metrics:
        if row.get(f"{m}_included"):
            outcome = "degraded" if row.get(f"{m}_degraded") else "not degraded"
        else:
            outcome = f"not counted: {row.get(f'{m}_exclusion_reason')}"
        scores.append(
            {
                "metric": names.get(m, m),
                "neutral": row.get(f"neutral_{m}"),
                "disability": row.get(f"disability_{m}"),
                "delta": row.get(f"{m}_delta"),
                "outcome": outcome,
            }
        )
    judged = [
        f"{d} Yes from {row[f'n_contrastive_{d}_yes']} of {row['n_contrastive_judges_included']}"
        for d in JUDGE_DIMENSIONS
        if row.get(f"n_contrastive_{d}_yes")
    ]
    return {**row, "scores": scores, "judged": judged}
