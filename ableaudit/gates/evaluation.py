"""Gate verdicts, computed inside the dbt build (python models int_gate_checks,
int_run_comparison, int_gate_regressions) from the per-run marts.

Verdicts (docs/gates.md):
  pass          the evidence meets the rule
  fail          it does not
  inconclusive  too few pairs (under the rule's min_pairs), a measure without any usable
                score (Regard offline, no judge verdict), or no run to compare with

A gate never passes for lack of evidence: an inconclusive verdict blocks an error rule
(passed_for_gate false) unless the rule says allow_inconclusive; a warn rule never blocks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ableaudit.gates.rules import AGAINST_KEYWORDS, GateRule
from ableaudit.stats._common import typed_frame
from ableaudit.stats.clustered import is_significant
from ableaudit.stats.paired import significance
from ableaudit.stats.runs import COMPARISON_STATS_SCHEMA, compare_cohorts

GATE_CHECK_SCHEMA: dict[str, str] = {
    "rule_id": "str",
    "rule_kind": "str",
    "severity": "str",
    "task": "str",
    "model_id": "str",
    "arm": "str",
    "query_set": "str",
    "run_id": "str",
    "scope": "str",
    "observed": "float64",
    "threshold": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "n_pairs": "int64",
    "verdict": "str",
    "allow_inconclusive": "bool",
    "passed_for_gate": "bool",
    "message": "str",
    "evidence_sql": "str",
}

TARGET = ["task", "model_id", "arm", "query_set"]

RUN_COMPARISON_SCHEMA: dict[str, str] = {
    "task": "str",
    "model_id": "str",
    "arm": "str",
    "query_set": "str",
    "compared_by": "str",
    "comparison": "str",
    "baseline_cohort": "str",
    "candidate_cohort": "str",
    "baseline_run_id": "str",
    "candidate_run_id": "str",
    "baseline_revision": "str",
    "candidate_revision": "str",
    "metric": "str",
    **COMPARISON_STATS_SCHEMA,
}


def passed_for_gate(severity: str, verdict: str, allow_inconclusive: bool) -> bool:
    """Whether a verdict lets the release through: a failure never does; an inconclusive
    verdict does only under a warn rule or allow_inconclusive."""
    if verdict == "pass":
        return True
    if verdict == "inconclusive":
        return severity == "warn" or allow_inconclusive
    return False


def _sql(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v if math.isfinite(v) else float("nan")


def _fmt(x: float, unit: str = "") -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.1f}{unit}"


def _row(rule: GateRule, target: dict, run_id: str | None, scope: str, **values: Any) -> dict:
    verdict = values["verdict"]
    return {
        "rule_id": rule.id,
        "rule_kind": rule.kind,
        "severity": rule.severity,
        **{k: target.get(k) for k in TARGET},
        "run_id": run_id,
        "scope": scope,
        "allow_inconclusive": rule.allow_inconclusive,
        "passed_for_gate": passed_for_gate(rule.severity, verdict, rule.allow_inconclusive),
        **values,
    }


def _no_evidence(
    rule: GateRule, target: dict, run_id: str | None, scope: str, threshold: float, message: str
) -> dict:
    """An inconclusive verdict for want of any data (no measure, no judge verdict, no baseline)."""
    return _row(
        rule,
        target,
        run_id,
        scope,
        observed=np.nan,
        threshold=threshold,
        ci_low=np.nan,
        ci_high=np.nan,
        n_pairs=0,
        verdict="inconclusive",
        message=message,
        evidence_sql=None,
    )


def threshold_verdict(
    rule: GateRule, observed: float, threshold: float, n: int, unavailable: str | None = None
) -> tuple[str, str]:
    """(verdict, why) of a rule that holds an observed rate under a threshold."""
    if unavailable:
        return "inconclusive", unavailable
    if n < rule.min_pairs:
        return "inconclusive", f"{n} pairs, fewer than min_pairs {rule.min_pairs}"
    if not math.isfinite(observed):
        return "inconclusive", "no value could be computed"
    if observed > threshold + 1e-9:
        return "fail", f"{_fmt(observed, '%')} is above {threshold:g}%"
    return "pass", f"{_fmt(observed, '%')} is within {threshold:g}%"


def _applies(rule: GateRule, target: dict) -> bool:
    return (rule.model_id in (None, target["model_id"])) and (rule.arm in (None, target["arm"]))


RUN_RATE_COLUMNS = ["cohort_kind", "cohort_id", "cohort_started_at", *TARGET]
"""The columns of run_rates that ``runs_of_targets`` reads."""


def runs_of_targets(run_rates: pd.DataFrame) -> pd.DataFrame:
    """One row per run of each target, ordered by start: task, model_id, arm, query_set,
    run_id, started_at (from run_rates, cohort_kind 'run')."""
    runs = run_rates[run_rates.cohort_kind == "run"]
    out = (
        runs.groupby([*TARGET, "cohort_id"], dropna=False)["cohort_started_at"]
        .min()
        .reset_index()
        .rename(columns={"cohort_id": "run_id", "cohort_started_at": "started_at"})
    )
    return out.sort_values([*TARGET, "started_at", "run_id"], kind="mergesort").reset_index(
        drop=True
    )


def _targets(runs: pd.DataFrame) -> Iterable[tuple[dict, list[str]]]:
    for key, group in runs.groupby(TARGET, sort=True, dropna=False):
        yield dict(zip(TARGET, key, strict=True)), list(group.run_id)


# --------------------------------------------------------------------------- threshold rules


def degradation_checks(rule: GateRule, run_rates: pd.DataFrame, runs: pd.DataFrame) -> list[dict]:
    p = rule.params
    metric, slice_, value = p["metric"], p.get("slice", "overall"), p.get("slice_value")
    rows = []
    rates = run_rates[(run_rates.cohort_kind == "run") & (run_rates.metric == metric)]
    known = sorted(run_rates.metric.dropna().unique())
    for target, run_ids in _targets(runs):
        if not _applies(rule, target):
            continue
        mine = rates[(rates[TARGET] == pd.Series(target)).all(axis=1)]
        for run_id in run_ids:
            cells = mine[(mine.cohort_id == run_id) & (mine.slice == slice_)]
            if value is not None:
                cells = cells[cells.slice_value == value]
            if cells.empty:
                what = f"{metric} {slice_}" + (f"={value}" if value else "")
                hint = "" if metric in known else f" (measures present: {', '.join(known)})"
                rows.append(
                    _no_evidence(
                        rule,
                        target,
                        run_id,
                        what,
                        p["max_pct"],
                        f"{rule.id}: {what}: no pair of this run has the measure{hint}",
                    )
                )
                continue
            for cell in cells.itertuples():
                scope = f"{metric} {slice_}={cell.slice_value}"
                rows.append(
                    _rate_row(rule, target, run_id, scope, cell, metric, slice_, "score", "")
                )
    return rows


def judge_drop_checks(
    rule: GateRule, pair_flags: pd.DataFrame, runs: pd.DataFrame, n_boot: int, seed: int
) -> list[dict]:
    """Per run and rubric judge: the significance tests of the run's own pairs, slice by slice
    (Holm over the slices of one judge); a slice fails when its judge score drops (neutral -
    disability-aware) by more than max_drop points with a Holm-adjusted p (of the query-level test)
    under alpha and a query-cluster interval that excludes 0 (``is_significant``)."""
    p = rule.params
    slice_, alpha, max_drop = p.get("slice", "disability"), p.get("alpha", 0.05), p["max_drop"]
    metric = f"judge_score:{p['judge']}" if p.get("judge") else None
    judged = pair_flags[
        (pair_flags.cohort_kind == "run")
        & pair_flags.metric.str.startswith("judge_score:")
        & pair_flags.included
    ]
    if metric:
        judged = judged[judged.metric == metric]
    rows = []
    for target, run_ids in _targets(runs):
        if not _applies(rule, target):
            continue
        mine = judged[(judged[TARGET] == pd.Series(target)).all(axis=1)]
        for run_id in run_ids:
            pairs = mine[mine.cohort_id == run_id]
            if pairs.empty:
                what = metric or "judge_score"
                rows.append(
                    _no_evidence(
                        rule,
                        target,
                        run_id,
                        f"{what} {slice_}",
                        max_drop,
                        f"{rule.id}: no usable rubric-judge score on this run's pairs",
                    )
                )
                continue
            tests = significance(
                pairs, cluster_col="query_id", n_boot=n_boot, seed=seed, slices=(slice_,)
            )
            for t in tests.itertuples():
                scope = f"{t.metric} {slice_}={t.slice_value}"
                drop = -_num(t.mean_diff)
                p_holm = _num(t.p_holm)
                n = int(t.n_pairs)
                if n < rule.min_pairs:
                    verdict, why = (
                        "inconclusive",
                        f"{n} pairs, fewer than min_pairs {rule.min_pairs}",
                    )
                elif not math.isfinite(p_holm):
                    verdict, why = "inconclusive", f"no test: {t.reason}"
                elif is_significant(p_holm, t.ci_low, t.ci_high, alpha) and drop > max_drop:
                    verdict = "fail"
                    why = (
                        f"drop {drop:.2f} > {max_drop:g} points, Holm p {p_holm:.3g} < {alpha:g}, "
                        "interval excludes 0"
                    )
                else:
                    verdict = "pass"
                    why = f"drop {drop:.2f} points, Holm p {p_holm:.3g}"
                rows.append(
                    _row(
                        rule,
                        target,
                        run_id,
                        scope,
                        observed=drop,
                        threshold=max_drop,
                        ci_low=-_num(t.ci_high),
                        ci_high=-_num(t.ci_low),
                        n_pairs=n,
                        verdict=verdict,
                        message=f"{rule.id}: {scope}: {why} ({n} pairs)",
                        evidence_sql=(
                            "select cohort_id as run_id, metric, slice, slice_value, n_pairs, "
                            "mean_neutral_score, mean_disability_score from run_rates where "
                            f"cohort_kind = 'run' and cohort_id = {_sql(run_id)} and model_id = "
                            f"{_sql(target['model_id'])} and arm = {_sql(target['arm'])} and "
                            f"metric = {_sql(t.metric)} and slice = {_sql(slice_)} and "
                            f"slice_value = {_sql(t.slice_value)}"
                        ),
                    )
                )
    return rows


def interpretive_shift_checks(
    rule: GateRule, run_rates: pd.DataFrame, runs: pd.DataFrame
) -> list[dict]:
    """Per run: each contrastive judge's Yes-rate on the rule's dimension, read from the
    verdicts on the run's own answers (run_rates, measure contrastive:<judge>:<dimension>),
    held under max_pct slice by slice."""
    p = rule.params
    dimension, slice_ = p.get("dimension", "interpret"), p.get("slice", "overall")
    prefix, suffix = "contrastive:", f":{dimension}"
    rates = run_rates[
        (run_rates.cohort_kind == "run")
        & (run_rates.slice == slice_)
        & run_rates.metric.str.startswith(prefix, na=False)
        & run_rates.metric.str.endswith(suffix, na=False)
    ]
    if p.get("judge"):
        rates = rates[rates.metric == f"{prefix}{p['judge']}{suffix}"]
    rows = []
    for target, run_ids in _targets(runs):
        if not _applies(rule, target):
            continue
        mine = rates[(rates[TARGET] == pd.Series(target)).all(axis=1)]
        for run_id in run_ids:
            cells = mine[mine.cohort_id == run_id]
            if cells.empty:
                judged = sorted(
                    {
                        m.rsplit(":", 1)[1]
                        for m in run_rates.metric.dropna().unique()
                        if m.startswith(prefix)
                    }
                )
                rows.append(
                    _no_evidence(
                        rule,
                        target,
                        run_id,
                        f"{dimension} {slice_}",
                        p["max_pct"],
                        f"{rule.id}: no contrastive-judge verdict on {dimension} of this run's answers"
                        + (f" from judge {p['judge']}" if p.get("judge") else "")
                        + (f" (dimensions judged: {', '.join(judged)})" if judged else ""),
                    )
                )
                continue
            for cell in cells.itertuples():
                judge = cell.metric[len(prefix) : -len(suffix)]
                scope = f"{judge} {dimension} {slice_}={cell.slice_value}"
                rows.append(
                    _rate_row(
                        rule,
                        target,
                        run_id,
                        scope,
                        cell,
                        cell.metric,
                        slice_,
                        "verdict",
                        "Yes-rate ",
                    )
                )
    return rows


def threshold_checks(
    rules: list[GateRule],
    run_rates: pd.DataFrame,
    pair_flags: pd.DataFrame,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """The verdicts of every rule that is not no_regression, per run of each target."""
    runs = runs_of_targets(run_rates)
    rows: list[dict] = []
    for rule in rules:
        if rule.kind == "degradation_max":
            rows += degradation_checks(rule, run_rates, runs)
        elif rule.kind == "judge_drop":
            rows += judge_drop_checks(rule, pair_flags, runs, n_boot, seed)
        elif rule.kind == "interpretive_shift_max":
            rows += interpretive_shift_checks(rule, run_rates, runs)
    return typed_frame(rows, GATE_CHECK_SCHEMA)


# --------------------------------------------------------------------------- comparisons


def last_passing(runs: pd.DataFrame, checks: pd.DataFrame) -> dict[str, str | None]:
    """For each run, the latest earlier run of its target whose error rules (other than
    no_regression) all passed; None when there is none."""
    blocked = set(checks.loc[(checks.severity == "error") & ~checks.passed_for_gate, "run_id"])
    out: dict[str, str | None] = {}
    for _target, run_ids in _targets(runs):
        best = None
        for run_id in run_ids:
            out[run_id] = best
            if run_id not in blocked:
                best = run_id
    return out


def baselines(
    rules: list[GateRule], runs: pd.DataFrame, checks: pd.DataFrame
) -> list[tuple[str, str, str]]:
    """(baseline run, candidate run, label) of every run comparison the rules need, besides
    each run against its previous run."""
    wanted = {r.params["against"] for r in rules if r.kind == "no_regression"}
    out: list[tuple[str, str, str]] = []
    passing = last_passing(runs, checks) if "last_passing" in wanted else {}
    for _target, run_ids in _targets(runs):
        for i, run_id in enumerate(run_ids):
            if passing.get(run_id):
                out.append((passing[run_id], run_id, "last_passing"))
            for pinned in wanted - set(AGAINST_KEYWORDS):
                if pinned in run_ids[:i]:
                    out.append((pinned, run_id, "pinned"))
    return out


def _revisions(flags: pd.DataFrame) -> dict[str, str]:
    revs = flags.dropna(subset=["model_revision"]).groupby("cohort_id")["model_revision"]
    return {k: ", ".join(sorted(set(v))) for k, v in revs}


def run_comparisons(
    pair_flags: pd.DataFrame,
    extra: list[tuple[str, str, str]],
    n_boot: int = 2000,
    seed: int = 0,
    min_units: int = 10,
) -> pd.DataFrame:
    """Every cohort against the previous cohort of its target (runs, and model revisions),
    plus the run comparisons in ``extra``; one row per comparison, measure and slice."""
    flags = pair_flags[pair_flags.included]
    frames = []
    for compared_by in ("run", "revision"):
        cohorts = flags[flags.cohort_kind == compared_by]
        if cohorts.empty:
            continue
        revisions = _revisions(cohorts) if compared_by == "run" else {}
        for key, group in cohorts.groupby(TARGET, sort=True, dropna=False):
            target = dict(zip(TARGET, key, strict=True))
            order = (
                group.groupby("cohort_id")["cohort_started_at"].min().sort_values(kind="mergesort")
            )
            ids = list(order.index)
            labels: dict[tuple[str, str], set[str]] = {}
            for prev, cur in zip(ids, ids[1:], strict=False):
                labels.setdefault((prev, cur), set()).add("previous")
            if compared_by == "run":
                for base, cand, label in extra:
                    if base in ids and cand in ids:
                        labels.setdefault((base, cand), set()).add(label)
            by_cohort = dict(tuple(group.groupby(["cohort_id", "metric"])))
            metrics = sorted(group.metric.unique())
            for (base, cand), names in sorted(labels.items()):
                for metric in metrics:
                    b = by_cohort.get((base, metric), group.iloc[0:0])
                    c = by_cohort.get((cand, metric), group.iloc[0:0])
                    stats = compare_cohorts(
                        b,
                        c,
                        n_boot=n_boot,
                        seed=seed,
                        min_units=min_units,
                        key=(*key, compared_by, base, cand, metric),
                    )
                    stats = stats.assign(
                        **target,
                        compared_by=compared_by,
                        comparison=", ".join(sorted(names)),
                        baseline_cohort=base,
                        candidate_cohort=cand,
                        baseline_run_id=base if compared_by == "run" else None,
                        candidate_run_id=cand if compared_by == "run" else None,
                        baseline_revision=revisions.get(base) if compared_by == "run" else base,
                        candidate_revision=revisions.get(cand) if compared_by == "run" else cand,
                        metric=metric,
                    )
                    frames.append(stats)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return typed_frame(out, RUN_COMPARISON_SCHEMA)


# --------------------------------------------------------------------------- regression rules


def regression_checks(
    rules: list[GateRule], comparison: pd.DataFrame, runs: pd.DataFrame, checks: pd.DataFrame
) -> pd.DataFrame:
    """The verdicts of the no_regression rules, per run of each target, read from run_comparison."""
    rows: list[dict] = []
    runs_cmp = comparison[comparison.compared_by == "run"]
    passing = last_passing(runs, checks)
    for rule in (r for r in rules if r.kind == "no_regression"):
        p = rule.params
        against, slice_ = p["against"], p.get("slice", "overall")
        for target, run_ids in _targets(runs):
            if not _applies(rule, target):
                continue
            for i, run_id in enumerate(run_ids):
                if against == "previous":
                    base = run_ids[i - 1] if i else None
                    missing = "no earlier run of this target to compare with"
                elif against == "last_passing":
                    base = passing.get(run_id)
                    missing = "no earlier run of this target passed its error rules"
                else:
                    if run_id == against or against in run_ids[i:]:
                        continue  # the pinned run itself, or a run before it
                    base = against if against in run_ids else None
                    missing = f"run {against} is not an earlier run of this target"
                cells = runs_cmp[
                    (runs_cmp.candidate_run_id == run_id)
                    & (runs_cmp.baseline_run_id == base)
                    & (runs_cmp.slice == slice_)
                    & (runs_cmp[TARGET] == pd.Series(target)).all(axis=1)
                ]
                if p.get("metrics"):
                    cells = cells[cells.metric.isin(p["metrics"])]
                if base is None or cells.empty:
                    why = (
                        missing
                        if base is None
                        else (
                            f"run_comparison has no {', '.join(p.get('metrics') or ['measure'])} "
                            f"of runs {base} -> {run_id}"
                        )
                    )
                    rows.append(
                        _no_evidence(
                            rule,
                            target,
                            run_id,
                            f"vs {against}",
                            p.get("max_increase", 0.0),
                            f"{rule.id}: {why}",
                        )
                    )
                    continue
                for cell in cells.itertuples():
                    scope = f"{cell.metric} {slice_}={cell.slice_value} vs {base} ({against})"
                    n = int(cell.n_units)
                    change = _num(cell.change)
                    limit = p.get("max_increase", 0.0)
                    if n < rule.min_pairs:
                        verdict, why = (
                            "inconclusive",
                            f"{n} units, fewer than min_pairs {rule.min_pairs}",
                        )
                    elif cell.flag == "inconclusive":
                        verdict, why = "inconclusive", str(cell.reason)
                    elif cell.flag == "regressed" and change > limit:
                        verdict = "fail"
                        why = (
                            f"regressed by {change:+.1f} points "
                            f"(95% CI {cell.change_ci_low:+.1f} to {cell.change_ci_high:+.1f})"
                        )
                    else:
                        verdict = "pass"
                        why = f"{cell.flag}, change {_fmt(change)} points"
                    rows.append(
                        _row(
                            rule,
                            target,
                            run_id,
                            scope,
                            observed=change,
                            threshold=limit,
                            ci_low=_num(cell.change_ci_low),
                            ci_high=_num(cell.change_ci_high),
                            n_pairs=n,
                            verdict=verdict,
                            message=f"{rule.id}: {scope}: {why}",
                            evidence_sql=(
                                "select * from run_comparison where compared_by = 'run' and "
                                f"baseline_run_id = {_sql(base)} and candidate_run_id = "
                                f"{_sql(run_id)} and metric = {_sql(cell.metric)} and slice = "
                                f"{_sql(slice_)} and slice_value = {_sql(cell.slice_value)}"
                            ),
                        )
                    )
    return typed_frame(rows, GATE_CHECK_SCHEMA)


def _rate_row(
    rule: GateRule,
    target: dict,
    run_id: str,
    scope: str,
    cell: Any,
    metric: str,
    slice_: str,
    scored: str,
    label: str,
) -> dict:
    """The verdict of a max-rate rule on one run_rates cell (``rule.params['max_pct']``):
    no usable ``scored`` (score, verdict) in the cell is inconclusive; ``label`` names the rate."""
    n = int(cell.n_pairs)
    unavailable = None
    if n == 0:
        unavailable = f"no usable {scored} ({cell.exclusion_reasons or 'no pair'})"
    max_pct = rule.params["max_pct"]
    verdict, why = threshold_verdict(rule, _num(cell.rate_pct), max_pct, n, unavailable)
    return _row(
        rule,
        target,
        run_id,
        scope,
        observed=_num(cell.rate_pct),
        threshold=max_pct,
        ci_low=_num(cell.rate_ci_low_pct),
        ci_high=_num(cell.rate_ci_high_pct),
        n_pairs=n,
        verdict=verdict,
        message=f"{rule.id}: {scope}: {label}{why}"
        + ("" if verdict == "inconclusive" else f" ({n} pairs)"),
        evidence_sql=(
            "select * from run_rates where cohort_kind = 'run' and cohort_id = "
            f"{_sql(run_id)} and model_id = {_sql(target['model_id'])} and arm = "
            f"{_sql(target['arm'])} and metric = {_sql(metric)} and slice = "
            f"{_sql(slice_)} and slice_value = {_sql(cell.slice_value)}"
        ),
    )
