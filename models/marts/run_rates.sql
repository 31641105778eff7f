{#
    The flag rates of int_run_pair_flags per run and per model revision: for
    each cohort (cohort_kind 'run' | 'revision'), task, model, arm, query set,
    measure (every scored metric's degradation, 'refusal', 'at_mismatch') and
    slice (macro slice_pairs), the included pairs, the flagged ones, the rate in
    % with its Wilson 95% interval, and the excluded pairs with their reasons.
    The current-state rates are in `degradation`; these are the same rule
    applied to one run's (or one revision's) own pairs.
#}
with

flags as (

    select * from {{ ref('int_run_pair_flags') }}

),

sliced as (

    {{ slice_pairs('flags') }}

),

excluded_reasons as (

    select
        cohort_kind,
        cohort_id,
        task,
        model_id,
        arm,
        query_set,
        metric,
        slice,
        slice_value,
        string_agg(exclusion_reason || ': ' || n_reason, '; ' order by exclusion_reason) as exclusion_reasons

    from (
        select
            cohort_kind,
            cohort_id,
            task,
            model_id,
            arm,
            query_set,
            metric,
            slice,
            slice_value,
            exclusion_reason,
            count(*) as n_reason
        from sliced
        where not included
        group by all
    ) as counted
    group by all

),

aggregated as (

    select
        cohort_kind,
        cohort_id,
        min(cohort_started_at) as cohort_started_at,
        task,
        model_id,
        arm,
        query_set,
        string_agg(distinct run_id, ', ' order by run_id) as run_ids,
        string_agg(distinct model_revision, ', ' order by model_revision) as model_revisions,
        metric,
        any_value(direction) as direction,
        slice,
        slice_value,
        count(case when included then 1 end) as n_pairs,
        count(case when included and flagged then 1 end) as n_flagged,
        count(case when not included then 1 end) as n_excluded,
        avg(case when included then neutral_score end) as mean_neutral_score,
        avg(case when included then disability_score end) as mean_disability_score

    from sliced
    group by cohort_kind, cohort_id, task, model_id, arm, query_set, metric, slice, slice_value

),

final as (

    select
        aggregated.cohort_kind,
        aggregated.cohort_id,
        aggregated.cohort_started_at,
        aggregated.task,
        aggregated.model_id,
        aggregated.arm,
        aggregated.query_set,
        aggregated.run_ids,
        aggregated.model_revisions,
        aggregated.metric,
        aggregated.direction,
        aggregated.slice,
        aggregated.slice_value,
        aggregated.n_pairs,
        aggregated.n_flagged,
        -- null, not 0, when no pair could be judged: "no evidence" is not "no degradation"
        100.0 * cast(aggregated.n_flagged as double) / nullif(aggregated.n_pairs, 0) as rate_pct,
        {{ wilson_bound('aggregated.n_flagged', 'aggregated.n_pairs', -1) }} as rate_ci_low_pct,
        {{ wilson_bound('aggregated.n_flagged', 'aggregated.n_pairs', 1) }} as rate_ci_high_pct,
        aggregated.n_excluded,
        excluded_reasons.exclusion_reasons,
        aggregated.mean_neutral_score,
        aggregated.mean_disability_score

    from aggregated
    left join excluded_reasons
        on aggregated.cohort_kind = excluded_reasons.cohort_kind
        and aggregated.cohort_id = excluded_reasons.cohort_id
        and {{ join_keys(
            'aggregated', 'excluded_reasons',
            ['task', 'model_id', 'arm', 'query_set', 'metric', 'slice', 'slice_value'],
        ) }}

)

select * from final
