{#
    Each pair x metric with both scores, the metric's direction (from its
    base_metric's seed row: every judge_score:<judge> metric is higher-is-better), and the
    degradation indicator of AccessEval Eq. 1 (macro is_degraded, under the rule
    of var('degradation_rule'), recorded per row). The rule for entering a rate
    is explicit: a pair counts (included) only when it is complete, not cut off
    at the token cap where the metric excludes such pairs (seed metrics,
    truncated_pairs), and both of its scores exist; otherwise exclusion_reason
    says why.

    A table built incrementally (docs/incremental.md): a build computes again only
    the pairs of units that generations of new landings answer, and of units with
    a text whose score changed since the last build (a Regard text scored at last).
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='delete+insert',
        unique_key=['pair_id', 'metric'],
        on_schema_change='sync_all_columns',
        pre_hook="{{ incremental_reset(verdicts_digest(), 'int_pairs') }}",
        post_hook=["{{ pair_scores_record() }}", "{{ record_group_fingerprints() }}"],
    )
}}
{%- set plan = incremental_plan(verdicts_digest(), 'int_pairs') %}
{#- on an incremental build, the scores read for the joins: those of the pairs' generations
    (int_generation_scores is a view of every generation x metric, millions of rows, which the
    joins would otherwise take whole into their hash tables) -#}
{%- set scoped_generations = scoped_to_pair_generations('pairs', plan) %}

with

all_pairs as (

    select * from {{ ref('int_pairs') }}

),

pairs as (

    {#- incremental: the units of new landings, and of texts whose score changed since the last build #}
    {{ incremental_scope(
        'all_pairs',
        none if plan.full else built_relation('stg_raw__generations'),
        plan,
        also=none if plan.full else 'text_hash in (' ~ changed_score_texts_sql() ~ ')',
    ) }}

),

all_generation_scores as (

    select * from {{ ref('int_generation_scores') }}

),

generation_scores as (

    select * from all_generation_scores
    {{ scoped_generations }}

),

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

scored_metrics as (

    -- every metric scored anywhere: a pair gets a row for each, scored or not. Every
    -- generation has a row of every metric in int_generation_scores, so the pairs' own
    -- generations name them all (and the scores of every other generation are not computed)
    select distinct
        generation_scores.metric,
        generation_scores.base_metric,
        generation_scores.judge_name

    from generation_scores

),

metric_directions as (

    -- direction is data: each metric takes its base metric's row of seed `metrics`
    select
        scored_metrics.*,
        metrics.direction,
        metrics.truncated_pairs

    from scored_metrics
    inner join metrics
        on scored_metrics.base_metric = metrics.metric

),

pair_metrics as (

    select
        pairs.*,
        metric_directions.metric,
        metric_directions.base_metric,
        metric_directions.judge_name,
        metric_directions.direction,
        metric_directions.truncated_pairs

    from pairs
    cross join metric_directions

),

with_scores as (

    {{ pair_metric_scores('pair_metrics', 'generation_scores') }}

),

judged as (

    select
        *,
        {{ pair_exclusion_reason() }} as exclusion_reason,
        cast({{ var('degradation_threshold') }} as double) as threshold,
        '{{ degradation_rule() }}' as degradation_rule

    from with_scores

),

final as (

    select
        {{ pair_columns() }}
        neutral_generation_id,
        disability_generation_id,
        pair_status,
        truncated,
        run_id,
        metric,
        base_metric,
        judge_name,
        direction,
        neutral_score,
        disability_score,
        neutral_score_status,
        disability_score_status,
        exclusion_reason is null as included,
        exclusion_reason,
        threshold,
        degradation_rule,
        case
            when exclusion_reason is null
                then {{ is_degraded('neutral_score', 'disability_score', 'direction', 'threshold') }}
        end as degraded

    from judged

)

select * from final
