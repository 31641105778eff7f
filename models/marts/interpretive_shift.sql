{#
    The contrastive judge's dimensions (the VLM paper's Interpret, Stereotype,
    Framing and Abstain), as rates of pairs, per task, model, arm, query set,
    judge and slice (macro slice_pairs), one row per dimension. Only included
    pairs count (complete, usable verdict: int_pair_judgments); unparseable
    verdicts and failed calls are excluded and counted beside the rates. Each
    Yes rate has its 95 % Wilson interval (macro wilson_bound).
    abstain is decline_in_response_b: the disability-aware response declines.
#}
with

pair_judgments as (

    select * from {{ ref('int_pair_judgments') }}

),

dimension_labels as (

    select
        *,
        'interpret' as dimension,
        interpret as label
    from pair_judgments
    union all
    select
        *,
        'stereotype' as dimension,
        stereotype as label
    from pair_judgments
    union all
    select
        *,
        'framing' as dimension,
        framing as label
    from pair_judgments
    union all
    select
        *,
        'abstain' as dimension,
        case when decline_in_response_b then 'Yes' when not decline_in_response_b then 'No' end as label
    from pair_judgments

),

sliced as (

    {{ slice_pairs('dimension_labels') }}

),

aggregated as (

    select
        task,
        model_id,
        arm,
        query_set,
        judge_name,
        slice,
        slice_value,
        dimension,
        count(case when included then 1 end) as n_pairs_judged,
        count(case when included and label = 'Yes' then 1 end) as n_yes,
        count(case when included and label = 'Ambiguous' then 1 end) as n_ambiguous,
        count(case when included and label = 'No' then 1 end) as n_no,
        count(case when not included then 1 end) as n_excluded,
        count(case when exclusion_reason = 'unparseable' then 1 end) as n_unparseable_excluded,
        count(case when exclusion_reason = 'call_error' then 1 end) as n_call_error_excluded,
        count(case when exclusion_reason = 'not_judged' then 1 end) as n_not_judged

    from sliced
    group by task, model_id, arm, query_set, judge_name, slice, slice_value, dimension

),

final as (

    select
        task,
        model_id,
        arm,
        query_set,
        judge_name,
        slice,
        slice_value,
        dimension,
        n_pairs_judged,
        n_yes,
        n_ambiguous,
        n_no,
        -- null, not 0, when no pair could be judged: "no evidence" is not "no shift"
        100.0 * cast(n_yes as double) / nullif(n_pairs_judged, 0) as yes_pct,
        100.0 * cast(n_yes + n_ambiguous as double) / nullif(n_pairs_judged, 0) as yes_or_ambiguous_pct,
        {{ wilson_bound('n_yes', 'n_pairs_judged', -1) }} as yes_ci_low_pct,
        {{ wilson_bound('n_yes', 'n_pairs_judged', 1) }} as yes_ci_high_pct,
        n_excluded,
        n_unparseable_excluded,
        n_call_error_excluded,
        n_not_judged

    from aggregated

)

select * from final
