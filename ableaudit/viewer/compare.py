"""Two runs, two model revisions or two models on the same pairs, side by side.

Runs and revisions are the cohorts of ``int_run_pairs`` (each run's or revision's own
answers, paired as ``int_pairs`` pairs them; ``pair_id`` matches one unit across cohorts);
whether a cohort's pair is degraded is ``int_run_pair_flags``'s flag. Two models are matched
on the pair's unit without the model (task, arm, query set, query, disability, temperature,
sample) in ``int_pairs``, with ``int_pair_scores``'s verdict. Scores come from
``int_generation_scores``; a side's delta is its disability-aware score minus its neutral
score, as in ``pair_details``, and the change is B's delta minus A's. The rates and their test
are the marts' (``run_comparison``, ``degradation``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ableaudit.viewer.sources import Reader

PAGE_SIZE = 20
BY = {"run": "two runs", "revision": "two model revisions", "model": "two models"}


@dataclass(frozen=True)
class Choice:
    """The compare page's query string."""

    by: str = "run"
    a: str = ""
    b: str = ""
    metric: str = ""
    page: int = 1

    @classmethod
    def parse(cls, query: Mapping[str, list[str]]) -> Choice:
        got = {k: (query.get(k) or [""])[-1].strip() for k in ("by", "a", "b", "metric", "page")}
        try:
            page = max(1, int(got.pop("page") or 1))
        except ValueError:
            page = 1
        if got["by"] not in BY:
            got["by"] = "run"
        return cls(page=page, **got)

    def query(self, **changes: Any) -> dict[str, str]:
        values = {"by": self.by, "a": self.a, "b": self.b, "metric": self.metric}
        values.update({k: str(v) for k, v in changes.items()})
        return {k: v for k, v in values.items() if v and not (k == "page" and v == "1")}


@dataclass
class Comparison:
    """What the compare page shows."""

    choice: Choice
    cohorts: list[dict[str, Any]]
    metrics: list[str]
    summary: dict[str, Any] = field(default_factory=dict)
    pairs: list[dict[str, Any]] = field(default_factory=list)
    rates: list[dict[str, Any]] = field(default_factory=list)
    """The marts' rows on the two sides (run_comparison; degradation per model)."""
    note: str | None = None

    @property
    def pages(self) -> int:
        return max(1, -(-int(self.summary.get("n_matched") or 0) // PAGE_SIZE))


def cohorts(reader: Reader, by: str) -> list[dict[str, Any]]:
    """The runs, revisions or models there are to compare, oldest first."""
    if by == "model":
        if not reader.has("main.int_pairs"):
            return []
        return reader.rows(
            "select model_id as id, model_id as models, null as started, count(*) as n_pairs "
            "from int_pairs group by model_id order by model_id"
        )
    if not reader.has("main.int_run_pairs"):
        return []
    return reader.rows(
        "select cohort_id as id, string_agg(distinct model_id, ', ' order by model_id) as models, "
        "min(cohort_started_at) as started, count(*) as n_pairs from int_run_pairs "
        "where cohort_kind = ? group by cohort_id order by started, cohort_id",
        [by],
    )


def _defaults(found: list[dict[str, Any]], by: str) -> tuple[str, str]:
    """The last two cohorts of one model (runs, revisions), or the first two models."""
    if by == "model":
        ids = [c["id"] for c in found]
        return (ids[0], ids[1]) if len(ids) > 1 else ("", "")
    for c in reversed(found):
        same = [o["id"] for o in found if o["models"] == c["models"]]
        if len(same) > 1:
            return same[-2], same[-1]
    return ("", "")


def _matched_sql(by: str) -> str:
    """Matched pairs of sides ``$a`` and ``$b``: each side's pair and its two generations."""
    keep = "task, arm, query_set, query_id, domain, disability_id, temperature, sample_index"
    if by == "model":
        side = "select * from int_pairs where model_id = {}"
        on = (
            "a.task = b.task and a.arm = b.arm and a.query_set = b.query_set "
            "and a.query_id = b.query_id and a.disability_id = b.disability_id "
            "and a.temperature is not distinct from b.temperature "
            "and a.sample_index = b.sample_index"
        )
    else:
        side = "select * from int_run_pairs where cohort_kind = $by and cohort_id = {}"
        on = "a.pair_id = b.pair_id"
    cols = ", ".join(f"a.{c}" for c in keep.split(", "))
    return (
        f"a as ({side.format('$a')}), b as ({side.format('$b')}), matched as (select {cols}, "
        "a.pair_id as a_pair, b.pair_id as b_pair, "
        "a.neutral_generation_id as a_n, a.disability_generation_id as a_d, "
        "b.neutral_generation_id as b_n, b.disability_generation_id as b_d "
        f"from a inner join b on {on})"
    )


def _flags_sql(by: str) -> str:
    if by == "model":
        return (
            "flags as (select model_id as side, pair_id, degraded, exclusion_reason "
            "from int_pair_scores where metric = $metric and model_id in ($a, $b))"
        )
    return (
        "flags as (select cohort_id as side, pair_id, flagged as degraded, exclusion_reason "
        "from int_run_pair_flags where cohort_kind = $by and metric = $metric "
        "and cohort_id in ($a, $b))"
    )


def _sides_sql(by: str) -> str:
    """Every matched pair with both sides' scores, deltas, verdicts and texts."""
    return (
        f"with {_matched_sql(by)}, {_flags_sql(by)}, "
        "scores as (select generation_id, score from int_generation_scores "
        "where metric = $metric), "
        "sides as (select m.*, "
        "an.score as a_neutral, ad.score as a_disability, ad.score - an.score as a_delta, "
        "bn.score as b_neutral, bd.score as b_disability, bd.score - bn.score as b_delta, "
        "(bd.score - bn.score) - (ad.score - an.score) as change, "
        "fa.degraded as a_degraded, fa.exclusion_reason as a_reason, "
        "fb.degraded as b_degraded, fb.exclusion_reason as b_reason "
        "from matched m "
        "left join scores an on an.generation_id = m.a_n "
        "left join scores ad on ad.generation_id = m.a_d "
        "left join scores bn on bn.generation_id = m.b_n "
        "left join scores bd on bd.generation_id = m.b_d "
        "left join flags fa on fa.side = $a and fa.pair_id = m.a_pair "
        "left join flags fb on fb.side = $b and fb.pair_id = m.b_pair) "
    )


SUMMARY = (
    "select count(*) as n_matched, count(change) as n_scored, "
    "avg(a_delta) filter (where change is not null) as a_mean_delta, "
    "avg(b_delta) filter (where change is not null) as b_mean_delta, "
    "avg(change) as mean_change, "
    "count(*) filter (where a_degraded is not null and b_degraded is not null) as n_counted, "
    "count(*) filter (where a_degraded and b_degraded) as both_degraded, "
    "count(*) filter (where a_degraded and b_degraded = false) as only_a_degraded, "
    "count(*) filter (where a_degraded = false and b_degraded) as only_b_degraded "
    "from sides"
)

PAGE = (
    "select s.*, gan.prompt_text as neutral_prompt, gad.prompt_text as disability_prompt, "
    "gan.response_text as a_neutral_answer, gad.response_text as a_disability_answer, "
    "gbn.response_text as b_neutral_answer, gbd.response_text as b_disability_answer "
    "from sides s "
    "left join stg_raw__generations gan on gan.generation_id = s.a_n "
    "left join stg_raw__generations gad on gad.generation_id = s.a_d "
    "left join stg_raw__generations gbn on gbn.generation_id = s.b_n "
    "left join stg_raw__generations gbd on gbd.generation_id = s.b_d "
    "order by abs(s.change) desc nulls last, s.arm, s.domain, s.disability_id, s.query_id, "
    "s.temperature, s.sample_index limit {limit} offset {offset}"
)

NEEDED = (
    "main.int_pairs",
    "main.int_run_pairs",
    "main.int_run_pair_flags",
    "main.int_pair_scores",
    "main.int_generation_scores",
    "main.stg_raw__generations",
)


def compare(reader: Reader, choice: Choice) -> Comparison:
    """The comparison ``choice`` asks for; the sides default to the latest two cohorts."""
    missing = [r for r in NEEDED if not reader.has(r)]
    if missing:
        return Comparison(choice, [], [], note=f"The published copy lacks {', '.join(missing)}.")
    found = cohorts(reader, choice.by)
    metrics = reader.values("select distinct metric from int_pair_scores order by 1")
    if not choice.a and not choice.b:
        a, b = _defaults(found, choice.by)
        choice = Choice(choice.by, a, b, choice.metric, choice.page)
    if not choice.metric and metrics:
        choice = Choice(
            choice.by, choice.a, choice.b, "vader" if "vader" in metrics else metrics[0], 1
        )
    out = Comparison(choice, found, metrics)
    ids = {c["id"] for c in found}
    unknown = [x for x in (choice.a, choice.b) if x and x not in ids]
    if len(found) < 2:
        out.note = f"The published copy holds fewer than {BY[choice.by]} to compare."
        return out
    if not choice.a or not choice.b or unknown:
        out.note = (
            f"No {choice.by} {unknown[0]!r} in the published copy; choose from the lists."
            if unknown
            else f"Choose {BY[choice.by]} to compare."
        )
        return out
    if choice.a == choice.b:
        out.note = "A and B are the same: choose two different ones."
        return out
    if choice.metric not in metrics:
        out.note = f"No metric {choice.metric!r} in int_pair_scores; choose from the list."
        return out
    params = {"by": choice.by, "a": choice.a, "b": choice.b, "metric": choice.metric}
    if choice.by == "model":
        params.pop("by")
    sides = _sides_sql(choice.by)
    out.summary = reader.rows(sides + SUMMARY, params)[0]
    offset = (choice.page - 1) * PAGE_SIZE
    out.pairs = reader.rows(sides + PAGE.format(limit=PAGE_SIZE, offset=offset), params)
    out.rates = _rates(reader, choice)
    return out


def _rates(reader: Reader, choice: Choice) -> list[dict[str, Any]]:
    """The marts' rates on the two sides: run_comparison (either order), or degradation."""
    if choice.by == "model":
        if not reader.has("main.degradation"):
            return []
        return reader.rows(
            "select model_id, arm, query_set, n_pairs, degradation_pct, degradation_ci_low_pct, "
            "degradation_ci_high_pct from degradation where slice = 'overall' and metric = ? "
            "and model_id in (?, ?) order by arm, query_set, model_id = ?, model_id",
            [choice.metric, choice.a, choice.b, choice.b],
        )
    if not reader.has("main.run_comparison"):
        return []
    return reader.rows(
        "select baseline_cohort, candidate_cohort, arm, query_set, baseline_rate, "
        "candidate_rate, change, change_ci_low, change_ci_high, p_value, test, flag, reason "
        "from run_comparison where compared_by = ? and metric = ? and slice = 'overall' "
        "and ((baseline_cohort = ? and candidate_cohort = ?) "
        "or (baseline_cohort = ? and candidate_cohort = ?)) order by arm, query_set",
        [choice.by, choice.metric, choice.a, choice.b, choice.b, choice.a],
    )
