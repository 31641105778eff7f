{#
    Run-to-run comparison: for each target (task, model, arm, query set), each
    run against the previous run (by start) and each model revision against the
    previous revision (compared_by), plus the baselines the gate rules name
    (comparison 'pinned', 'last_passing'), per measure of int_run_pair_flags
    and slice: both flag rates, the change in points with a bootstrap CI over
    queries (images), paired on the matched units, a test of the change, and a
    flag under the stated rule (flag_rule). Statistics: python model
    int_run_comparison (ableaudit.stats.runs).
#}
with

comparisons as (

    select * from {{ ref('int_run_comparison') }}

),

final as (

    select
        model_id,
        arm,
        task,
        query_set,
        metric,
        slice,
        slice_value,
        compared_by,
        comparison,
        baseline_cohort,
        candidate_cohort,
        baseline_run_id,
        candidate_run_id,
        baseline_revision,
        candidate_revision,
        n_units,
        n_baseline_pairs,
        n_candidate_pairs,
        paired,
        baseline_rate,
        candidate_rate,
        change,
        change_ci_low,
        change_ci_high,
        p_value,
        test,
        flag,
        flag_rule,
        reason

    from comparisons

)

select * from final
