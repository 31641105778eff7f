{#
    The contrastive judges' dimensions (the VLM paper's Interpret, Stereotype,
    Framing and Abstain, or those of a judge's own dimension set), as rates of
    pairs, per task, model, arm, query set, judge and slice (macro slice_pairs),
    one row per dimension. Only included pairs count (complete, usable verdict
    asking the dimension: int_pair_dimension_labels); unparseable verdicts,
    failed calls and verdicts on a set without the dimension are excluded and
    counted beside the rates. n_yes counts the answers that flag a pair (the
    dimension's flag_position: 'Yes' for the built-in labels), n_ambiguous the
    answers between the best and those, n_no the best. Each Yes rate has its
    95 % Wilson interval (macro wilson_bound) and the interval that counts each
    query once where a query gives several pairs (macro cluster_rate_interval),
    placed against the overall Yes rate of its model, arm, judge and dimension
    (macro rate_vs_overall), as in degradation.
#}
with

dimension_labels as (

    select * from {{ ref('int_pair_dimension_labels') }}

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
        count(case when included and is_flagged then 1 end) as n_yes,
        count(case when included and not is_flagged and value_position > 0 then 1 end) as n_ambiguous,
        count(case when included and value_position = 0 then 1 end) as n_no,
        count(case when not included then 1 end) as n_excluded,
        count(case when exclusion_reason = 'unparseable' then 1 end) as n_unparseable_excluded,
        count(case when exclusion_reason = 'call_error' then 1 end) as n_call_error_excluded,
        count(case when exclusion_reason = 'not_judged' then 1 end) as n_not_judged,
        count(case when exclusion_reason = 'not_asked' then 1 end) as n_not_asked

    from sliced
    group by task, model_id, arm, query_set, judge_name, slice, slice_value, dimension

),

counted_flags as (

    -- the judged pairs alone, narrow: the query is the unit the interval counts once
    select
        task,
        model_id,
        arm,
        query_set,
        judge_name,
        dimension,
        domain,
        disability_id,
        query_id,
        case when label = 'Yes' then 1 else 0 end as success

    from dimension_labels
    where included

),

query_clusters as (

    {{ query_cluster_sums('counted_flags', ['task', 'model_id', 'arm', 'query_set', 'judge_name', 'dimension']) }}

),

intervals as (

    select
        aggregated.*,
        coalesce(query_clusters.n_clusters, 0) as n_clusters,
        -- null, not 0, when no pair could be judged: "no evidence" is not "no shift"
        100.0 * cast(aggregated.n_yes as double) / nullif(aggregated.n_pairs_judged, 0) as yes_pct,
        {{ cluster_rate_interval(
            'aggregated.n_yes', 'aggregated.n_pairs_judged', 'query_clusters.n_clusters',
            'query_clusters.max_pairs_per_cluster', 'query_clusters.sum_xx', 'query_clusters.sum_xm',
            'query_clusters.sum_mm'
        ) }}

    from aggregated
    left join query_clusters
        on aggregated.task = query_clusters.task
        and aggregated.model_id = query_clusters.model_id
        and aggregated.arm = query_clusters.arm
        and aggregated.query_set = query_clusters.query_set
        and aggregated.judge_name = query_clusters.judge_name
        and aggregated.dimension = query_clusters.dimension
        and aggregated.slice = query_clusters.slice
        and aggregated.slice_value is not distinct from query_clusters.slice_value

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
        yes_pct,
        100.0 * cast(n_yes + n_ambiguous as double) / nullif(n_pairs_judged, 0) as yes_or_ambiguous_pct,
        {{ wilson_bound('n_yes', 'n_pairs_judged', -1) }} as yes_ci_low_pct,
        {{ wilson_bound('n_yes', 'n_pairs_judged', 1) }} as yes_ci_high_pct,
        n_clusters,
        design_effect,
        rate_ci_low_pct,
        rate_ci_high_pct,
        rate_ci_method,
        {{ rate_vs_overall(
            'yes_pct', ['task', 'model_id', 'arm', 'query_set', 'judge_name', 'dimension']
        ) }} as vs_overall,
        n_excluded,
        n_unparseable_excluded,
        n_call_error_excluded,
        n_not_judged,
        n_not_asked

    from intervals

)

select * from final
