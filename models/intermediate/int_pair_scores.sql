{#
    Each pair x metric with both scores, the metric's direction (from its
    base_metric's seed row: every judge_score:<judge> metric is higher-is-better), and the
    degradation indicator of AccessEval Eq. 1 (macro is_degraded, under the rule
    of var('degradation_rule'), recorded per row). A pair metric (a similarity or a
    sentiment parity of the two answers: stg_registry__pair_scorers, its scores in
    response_pair_scores) is flagged by its own rule and threshold instead (macro
    pair_metric_flag, var('pair_metric_thresholds'); recorded per row in
    degradation_rule and threshold), and so is a per-text scorer that declares a rule
    of its own (stg_registry__scorers.flag_rule: a masked sentiment parity). The rule for entering a rate
    is explicit: a pair counts (included) only when it is complete, not cut off
    at the token cap where the metric excludes such pairs (seed metrics,
    truncated_pairs), and both of its scores exist; otherwise exclusion_reason
    says why.

    A table built incrementally (docs/incremental.md): a build computes again only
    the pairs of units that generations of new landings answer, and of units with
    a text whose score changed since the last build (a Regard text scored at last); a new
    version or threshold of a pair scorer rebuilds it in full (macro pair_scorer_versions).
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='delete+insert',
        unique_key=['pair_id', 'metric'],
        on_schema_change='sync_all_columns',
        pre_hook="{{ incremental_reset(verdicts_digest() + pair_scorer_versions(), 'int_pairs') }}",
        post_hook=["{{ pair_scores_record() }}", "{{ record_group_fingerprints() }}"],
    )
}}
{%- set plan = incremental_plan(verdicts_digest() + pair_scorer_versions(), 'int_pairs') %}
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

masked_scores as (

    -- the masked scorers' scores, per answer and the category it is masked for
    select * from {{ ref('int_generation_masked_scores') }}
    {{ scoped_generations }}

),

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

pair_scorers as (

    select * from {{ ref('stg_registry__pair_scorers') }}

),

-- the text of each generation of the pairs, for their pair scores
generation_texts as (

    select
        generation_id,
        text_hash
    from {{ ref('stg_raw__generations') }}
    {{ scoped_generations }}

),

pair_values as (

    select * from {{ ref('response_pair_scores') }}
    {%- if not plan.full %}
    where neutral_text_hash in (select generation_texts.text_hash from generation_texts)
    {%- endif %}

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

    union

    -- the masked scorers' metrics (every pair has a row of each, scored or not)
    select
        metric,
        metric as base_metric,
        cast(null as varchar) as judge_name

    from {{ ref('stg_registry__scorers') }}
    where score_model = 'response_scores_masked'

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

    {{ pair_metric_scores('pair_metrics', 'generation_scores', 'masked_scores') }}

),

text_metric_scores as (

    -- Eq. 1 at var degradation_threshold, unless the scorer declares a rule of its own
    select
        with_scores.*,
        coalesce(own_rules.threshold, cast({{ var('degradation_threshold') }} as double)) as threshold,
        coalesce(own_rules.flag_rule, '{{ degradation_rule() }}') as degradation_rule,
        own_rules.flag_rule is not null as is_pair_metric

    from with_scores
    left join {{ own_flag_rules() }} as own_rules
        on with_scores.metric = own_rules.metric

),

pair_metric_values as (

    {{ pair_scorer_scores('pairs', 'pair_scorers', 'generation_texts', 'pair_values') }}

),

all_scores as (

    select * from text_metric_scores
    union all by name
    select * from pair_metric_values

),

judged as (

    select
        *,
        {{ pair_exclusion_reason() }} as exclusion_reason

    from all_scores

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
            when exclusion_reason is not null then null
            when is_pair_metric
                then {{ pair_metric_flag('degradation_rule', 'neutral_score', 'disability_score', 'threshold') }}
            else {{ is_degraded('neutral_score', 'disability_score', 'direction', 'threshold') }}
        end as degraded

    from judged

)

select * from final
