{#
    AccessEval Eq. 1: the share of NQ-DQ pairs whose disability-aware response
    is degraded (macro is_degraded, under var('degradation_rule'), recorded in
    degradation_rule), per task, model, arm, query set and metric, overall and by
    domain, disability and their cross (macro slice_pairs). Each rubric judge is
    its own metric, 'judge_score:<judge_name>'. Each rate has its 95 % Wilson
    interval (macro wilson_bound). Only included pairs count (n_pairs);
    excluded ones are counted beside them (n_excluded) and explained in
    data_quality; n_truncated says how many counted pairs hold an answer cut
    off at the token cap (none for a metric that excludes such pairs).

    Beside the Wilson interval, which takes the pairs as independent, each rate has an
    interval that counts each query once where a query gives several pairs (macro
    cluster_rate_interval: rate_ci_low_pct, rate_ci_high_pct, rate_ci_method) and says
    whether that interval lies above or below the overall rate of its model, arm and metric
    (macro rate_vs_overall: vs_overall), which is what the report's shading follows.

    Built model by model (macro model_scope_plan): a build computes again only the models
    whose rows of int_pair_scores changed; a change in its reuse key (macro reuse_key)
    computes every model.
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='sync_all_columns',
        pre_hook="{{ model_scope_reset(['int_pair_scores']) }}",
        post_hook="{{ model_scope_record(['int_pair_scores']) }}",
    )
}}
{%- set plan = model_scope_plan(['int_pair_scores']) %}

with

pair_scores as (

    select * from {{ ref('int_pair_scores') }}
    {{ model_scope_filter(plan) }}

),

sliced as (

    {{ slice_pairs('pair_scores') }}

),

aggregated as (

    select
        task,
        model_id,
        arm,
        query_set,
        metric,
        base_metric,
        judge_name,
        slice,
        slice_value,
        count(case when included then 1 end) as n_pairs,
        count(case when included and degraded then 1 end) as n_degraded,
        count(case when not included then 1 end) as n_excluded,
        count(case when included and truncated then 1 end) as n_truncated,
        max(threshold) as threshold,
        max(degradation_rule) as degradation_rule

    from sliced
    -- base_metric and judge_name follow from metric: grouping by them changes no group
    group by task, model_id, arm, query_set, metric, base_metric, judge_name, slice, slice_value

),

counted_flags as (

    -- the counted pairs alone, narrow: the query is the unit the interval counts once
    select
        task,
        model_id,
        arm,
        query_set,
        metric,
        domain,
        disability_id,
        query_id,
        cast(degraded as integer) as success

    from pair_scores
    where included

),

query_clusters as (

    {{ query_cluster_sums('counted_flags', ['task', 'model_id', 'arm', 'query_set', 'metric']) }}

),

intervals as (

    select
        aggregated.*,
        coalesce(query_clusters.n_clusters, 0) as n_clusters,
        100.0 * cast(aggregated.n_degraded as double) / nullif(aggregated.n_pairs, 0) as degradation_pct,
        {{ cluster_rate_interval(
            'aggregated.n_degraded', 'aggregated.n_pairs', 'query_clusters.n_clusters',
            'query_clusters.max_pairs_per_cluster', 'query_clusters.sum_xx', 'query_clusters.sum_xm',
            'query_clusters.sum_mm'
        ) }}

    from aggregated
    left join query_clusters
        on aggregated.task = query_clusters.task
        and aggregated.model_id = query_clusters.model_id
        and aggregated.arm = query_clusters.arm
        and aggregated.query_set = query_clusters.query_set
        and aggregated.metric = query_clusters.metric
        and aggregated.slice = query_clusters.slice
        and aggregated.slice_value is not distinct from query_clusters.slice_value

),

final as (

    select
        task,
        model_id,
        arm,
        query_set,
        metric,
        base_metric,
        judge_name,
        slice,
        slice_value,
        n_pairs,
        n_degraded,
        -- null, not 0, when no pair could be judged: "no evidence" is not "no degradation"
        degradation_pct,
        {{ wilson_bound('n_degraded', 'n_pairs', -1) }} as degradation_ci_low_pct,
        {{ wilson_bound('n_degraded', 'n_pairs', 1) }} as degradation_ci_high_pct,
        n_clusters,
        design_effect,
        rate_ci_low_pct,
        rate_ci_high_pct,
        rate_ci_method,
        {{ rate_vs_overall('degradation_pct', ['task', 'model_id', 'arm', 'query_set', 'metric']) }} as vs_overall,
        n_excluded,
        n_truncated,
        threshold,
        degradation_rule

    from intervals

)

select * from final
