{#
    Where every row went (nothing is silently dropped): per run, task, model, arm and
    query set, the count of generations by status, of answers cut off at the
    token cap (finish_reason 'length'), of pairs by pair status, of
    generation scores by metric and score status (Regard unavailable or
    truncated included), of pairs in or out of each metric's rate, by reason,
    and of judge verdicts by status ('judgment': per rubric judge, each 'ok'
    generation; per contrastive judge, each complete pair).

    Built model by model (macro model_scope_plan): a build computes again only the models
    whose generations, pairs or pair scores changed, or whose texts' scores did; a landed
    verdict or a change in its reuse key (macro reuse_key) computes every model.
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='sync_all_columns',
        pre_hook="{%- set scope = data_quality_scope() -%}{{ model_scope_reset(scope.inputs, scope.extra, scope.texts) }}",
        post_hook="{%- set scope = data_quality_scope() -%}{{ model_scope_record(scope.inputs, scope.extra, scope.texts) }}",
    )
}}
{%- set scope = data_quality_scope() %}
{%- set plan = model_scope_plan(scope.inputs, scope.extra, scope.texts) %}
with

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}
    {{ model_scope_filter(plan) }}

),

pairs as (

    select * from {{ ref('int_pairs') }}
    {{ model_scope_filter(plan) }}

),

generation_scores as (

    select * from {{ ref('int_generation_scores') }}
    {{ model_scope_filter(plan) }}

),

pair_scores as (

    select * from {{ ref('int_pair_scores') }}
    {{ model_scope_filter(plan) }}

),

generation_judgments as (

    select * from {{ ref('int_generation_judgments') }}

),

pair_judgments as (

    select * from {{ ref('int_pair_judgments') }}
    {{ model_scope_filter(plan) }}

),

generation_counts as (

    select
        run_id,
        task,
        model_id,
        arm,
        query_set,
        'generation' as area,
        cast(null as varchar) as metric,
        status,
        count(*) as n_rows

    from generations
    group by run_id, task, model_id, arm, query_set, status

),

pair_counts as (

    select
        run_id,
        task,
        model_id,
        arm,
        query_set,
        'pair' as area,
        cast(null as varchar) as metric,
        pair_status as status,
        count(*) as n_rows

    from pairs
    group by run_id, task, model_id, arm, query_set, pair_status

),

score_counts as (

    select
        generations.run_id,
        generations.task,
        generations.model_id,
        generations.arm,
        generations.query_set,
        'score' as area,
        generation_scores.metric,
        generation_scores.score_status as status,
        count(*) as n_rows

    from generation_scores
    inner join generations
        on generation_scores.generation_id = generations.generation_id
    group by
        generations.run_id,
        generations.task,
        generations.model_id,
        generations.arm,
        generations.query_set,
        generation_scores.metric,
        generation_scores.score_status

),

truncation_counts as (

    -- answers that stopped at the token cap rather than finishing; an answer whose
    -- engine or import file says neither is counted as such, not as finished
    select
        run_id,
        task,
        model_id,
        arm,
        query_set,
        'truncation' as area,
        cast(null as varchar) as metric,
        case
            when finish_reason = 'length' then 'truncated'
            when finish_reason is null then 'unreported'
            else 'finished'
        end as status,
        count(*) as n_rows

    from generations
    where status = 'ok'
    group by all

),

rate_counts as (

    select
        run_id,
        task,
        model_id,
        arm,
        query_set,
        'rate' as area,
        metric,
        coalesce(exclusion_reason, 'included') as status,
        count(*) as n_rows

    from pair_scores
    group by run_id, task, model_id, arm, query_set, metric, coalesce(exclusion_reason, 'included')

),

rubric_judgment_counts as (

    select
        generations.run_id,
        generations.task,
        generations.model_id,
        generations.arm,
        generations.query_set,
        'judgment' as area,
        'rubric:' || generation_scores.judge_name as metric,
        coalesce(generation_judgments.verdict_status, 'not_judged') as status,
        count(*) as n_rows

    from generation_scores
    inner join generations
        on generation_scores.generation_id = generations.generation_id
    left join generation_judgments
        on generation_scores.generation_id = generation_judgments.generation_id
        and generation_scores.judge_name = generation_judgments.judge_name
    where
        generation_scores.base_metric = 'judge_score'
        and generations.status = 'ok'
    group by
        generations.run_id,
        generations.task,
        generations.model_id,
        generations.arm,
        generations.query_set,
        generation_scores.judge_name,
        coalesce(generation_judgments.verdict_status, 'not_judged')

),

contrastive_judgment_counts as (

    select
        run_id,
        task,
        model_id,
        arm,
        query_set,
        'judgment' as area,
        'contrastive:' || judge_name as metric,
        coalesce(verdict_status, 'not_judged') as status,
        count(*) as n_rows

    from pair_judgments
    where pair_status = 'complete'
    group by run_id, task, model_id, arm, query_set, judge_name, coalesce(verdict_status, 'not_judged')

),

final as (

    select * from generation_counts
    union all
    select * from pair_counts
    union all
    select * from truncation_counts
    union all
    select * from score_counts
    union all
    select * from rate_counts
    union all
    select * from rubric_judgment_counts
    union all
    select * from contrastive_judgment_counts

)

select * from final
