-- pair_details and degradation count the same pairs: per task, model, arm, query
-- set and metric (overall slice), the pairs pair_details marks included, degraded,
-- excluded, and included despite an answer cut off at the token cap are
-- degradation's n_pairs, n_degraded, n_excluded and n_truncated. The rubric
-- judges are summed over judges on both sides; the pair metrics (similarities, sentiment
-- parity) are checked as the text metrics are.
with

pair_details as (

    select * from {{ ref('pair_details') }}

),

degradation as (

    select * from {{ ref('degradation') }}
    where slice = 'overall'

),

text_metrics as (

    select metric from {{ ref('stg_registry__scorers') }}
    where metric is not null
    union all
    select metric from {{ ref('stg_registry__pair_scorers') }}

),

metric_rows as (

    {#- every text and pair metric the registries declare, from its pair_details columns #}
    {%- set declared = (registered_scorers() | selectattr('metric') | map(attribute='metric') | list)
        + (registered_pair_scorers() | map(attribute='metric') | list) %}
    select
        pair_details.task,
        pair_details.model_id,
        pair_details.arm,
        pair_details.query_set,
        text_metrics.metric,
        case text_metrics.metric
            {%- for m in declared %}
                when '{{ m }}' then pair_details.{{ m }}_included
            {%- endfor %}
        end as included,
        case text_metrics.metric
            {%- for m in declared %}
                when '{{ m }}' then pair_details.{{ m }}_degraded
            {%- endfor %}
        end as degraded,
        pair_details.truncated
    from pair_details
    cross join text_metrics

),

detail_counts as (

    select
        task,
        model_id,
        arm,
        query_set,
        metric,
        count(case when included then 1 end) as n_pairs,
        count(case when degraded then 1 end) as n_degraded,
        count(case when not included then 1 end) as n_excluded,
        count(case when included and truncated then 1 end) as n_truncated

    from metric_rows
    group by task, model_id, arm, query_set, metric
    union all
    select
        task,
        model_id,
        arm,
        query_set,
        'judge_score' as metric,
        sum(n_rubric_judges_included) as n_pairs,
        sum(n_rubric_judges_degraded) as n_degraded,
        sum(n_rubric_judges - n_rubric_judges_included) as n_excluded,
        sum(case when truncated then n_rubric_judges_included else 0 end) as n_truncated

    from pair_details
    where n_rubric_judges > 0
    group by task, model_id, arm, query_set

),

rate_counts as (

    select
        task,
        model_id,
        arm,
        query_set,
        base_metric as metric,
        sum(n_pairs) as n_pairs,
        sum(n_degraded) as n_degraded,
        sum(n_excluded) as n_excluded,
        sum(n_truncated) as n_truncated

    from degradation
    group by task, model_id, arm, query_set, base_metric

),

final as (

    select
        coalesce(detail_counts.task, rate_counts.task) as task,
        coalesce(detail_counts.model_id, rate_counts.model_id) as model_id,
        coalesce(detail_counts.arm, rate_counts.arm) as arm,
        coalesce(detail_counts.query_set, rate_counts.query_set) as query_set,
        coalesce(detail_counts.metric, rate_counts.metric) as metric,
        detail_counts.n_pairs as detail_n_pairs,
        rate_counts.n_pairs as rate_n_pairs,
        detail_counts.n_degraded as detail_n_degraded,
        rate_counts.n_degraded as rate_n_degraded,
        detail_counts.n_excluded as detail_n_excluded,
        rate_counts.n_excluded as rate_n_excluded,
        detail_counts.n_truncated as detail_n_truncated,
        rate_counts.n_truncated as rate_n_truncated

    from detail_counts
    full outer join rate_counts
        on detail_counts.task = rate_counts.task
        and detail_counts.model_id = rate_counts.model_id
        and detail_counts.arm = rate_counts.arm
        and detail_counts.query_set = rate_counts.query_set
        and detail_counts.metric = rate_counts.metric

)

select * from final
where
    detail_n_pairs is distinct from rate_n_pairs
    or detail_n_degraded is distinct from rate_n_degraded
    or detail_n_excluded is distinct from rate_n_excluded
    or detail_n_truncated is distinct from rate_n_truncated
