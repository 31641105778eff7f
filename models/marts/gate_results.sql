{#
    The release gates' verdicts: one row per rule of var('gates_file') x scope
    x run of each target. Threshold rules come from python model
    int_gate_checks, no_regression rules from int_gate_regressions (which read
    run_rates, int_run_pair_flags, interpretive_shift and run_comparison);
    verdicts and passed_for_gate are decided there, once
    (ableaudit.gates.evaluation). run_started_at orders a target's runs:
    `ableaudit gate` reads the latest one.
#}
with

checks as (

    select * from {{ ref('int_gate_checks') }}

),

regressions as (

    select * from {{ ref('int_gate_regressions') }}

),

run_rates as (

    select * from {{ ref('run_rates') }}
    where cohort_kind = 'run'

),

run_starts as (

    select
        cohort_id as run_id,
        min(cohort_started_at) as run_started_at

    from run_rates
    group by cohort_id

),

verdicts as (

    select * from checks
    union all
    select * from regressions

),

final as (

    select
        verdicts.rule_id,
        verdicts.rule_kind,
        verdicts.severity,
        verdicts.model_id,
        verdicts.arm,
        verdicts.task,
        verdicts.query_set,
        verdicts.run_id,
        run_starts.run_started_at,
        verdicts.scope,
        verdicts.observed,
        verdicts.threshold,
        verdicts.ci_low,
        verdicts.ci_high,
        verdicts.n_pairs,
        verdicts.verdict,
        verdicts.allow_inconclusive,
        verdicts.passed_for_gate,
        verdicts.message,
        verdicts.evidence_sql,
        -- the latest run of its target: the one a release decision reads
        verdicts.run_id = last_value(verdicts.run_id) over (
            partition by verdicts.task, verdicts.model_id, verdicts.arm, verdicts.query_set
            order by run_starts.run_started_at, verdicts.run_id
            rows between unbounded preceding and unbounded following
        ) as is_latest_run

    from verdicts
    left join run_starts
        on verdicts.run_id = run_starts.run_id

)

select * from final
