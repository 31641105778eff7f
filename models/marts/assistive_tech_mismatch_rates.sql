{#
    How often a model recommends an assistive technology for a disability it
    does not serve (AccessEval D.1's "semantic overgeneralisation": screen
    readers for hearing impairments), per task, model, arm, query set and
    disability group (each disability id, and 'all' pooling every
    disability-aware response). A response counts as recommending a technology
    when it mentions it at least once outside a negation
    (response_assistive_tech); fits come from
    seeds/assistive_technology_disabilities.csv. Rates are over the answered
    responses the current matcher has seen (n_matched).

    Built model by model (macro model_scope_plan): a build computes again only the models
    whose generations changed (a text's matches follow from the text, the matcher and the
    seeds); a change in its reuse key (macro reuse_key: its code or that of a model or seed
    upstream, such as int_generation_assistive_tech's rule) computes every model.
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='sync_all_columns',
        pre_hook="{{ model_scope_reset(['stg_raw__generations']) }}",
        post_hook="{{ model_scope_record(['stg_raw__generations']) }}",
    )
}}
{%- set plan = model_scope_plan(['stg_raw__generations']) %}

with

generations as (

    select * from {{ ref('stg_raw__generations') }}
    {{ model_scope_filter(plan) }}

),

generation_assistive_tech as (

    select * from {{ ref('int_generation_assistive_tech') }}
    {{ model_scope_filter(plan) }}

),

disability_generations as (

    select * from generations
    where condition = 'disability'

),

disability_mentions as (

    select * from generation_assistive_tech
    where condition = 'disability'

),

per_generation as (

    select
        generation_id,
        task,
        model_id,
        arm,
        query_set,
        disability_id,
        bool_or(match_status = 'not_matched') as is_not_matched,
        count(case when is_recommended then 1 end) as n_recommended,
        count(case when is_recommended and fit = 'serves' then 1 end) as n_serves,
        count(case when is_recommended and fit = 'partial' then 1 end) as n_partial,
        count(case when is_recommended and fit = 'mismatch' then 1 end) as n_mismatch

    from disability_mentions
    group by generation_id, task, model_id, arm, query_set, disability_id

),

grouped_generations as (

    select
        *,
        disability_id as disability_group
    from per_generation
    union all
    select
        *,
        'all' as disability_group
    from per_generation

),

grouped_mismatches as (

    select
        *,
        disability_id as disability_group
    from disability_mentions
    where is_recommended and fit = 'mismatch'
    union all
    select
        *,
        'all' as disability_group
    from disability_mentions
    where is_recommended and fit = 'mismatch'

),

generation_groups as (

    select
        task,
        model_id,
        arm,
        query_set,
        disability_id as disability_group,
        count(*) as n_generations,
        count(case when status = 'ok' then 1 end) as n_responses

    from disability_generations
    group by task, model_id, arm, query_set, disability_id

    union all

    select
        task,
        model_id,
        arm,
        query_set,
        'all' as disability_group,
        count(*) as n_generations,
        count(case when status = 'ok' then 1 end) as n_responses

    from disability_generations
    group by task, model_id, arm, query_set

),

aggregated as (

    select
        task,
        model_id,
        arm,
        query_set,
        disability_group,
        count(case when not is_not_matched then 1 end) as n_matched,
        count(case when n_recommended > 0 then 1 end) as n_responses_recommending,
        count(case when n_partial > 0 then 1 end) as n_responses_with_any_partial,
        count(case when n_mismatch > 0 then 1 end) as n_responses_with_any_mismatch,
        cast(sum(n_recommended) as bigint) as n_mentions,
        cast(sum(n_serves) as bigint) as n_serves_mentions,
        cast(sum(n_partial) as bigint) as n_partial_mentions,
        cast(sum(n_mismatch) as bigint) as n_mismatched_mentions,
        -- the responses with the most mismatched technologies first
        (list(generation_id order by n_mismatch desc, generation_id asc) filter (where n_mismatch > 0))[1:3]
            as example_generation_ids

    from grouped_generations
    group by task, model_id, arm, query_set, disability_group

),

technology_mismatches as (

    select
        task,
        model_id,
        arm,
        query_set,
        disability_group,
        technology_id,
        count(*) as n_responses

    from grouped_mismatches
    group by task, model_id, arm, query_set, disability_group, technology_id

),

top_mismatches as (

    select
        task,
        model_id,
        arm,
        query_set,
        disability_group,
        (list(technology_id order by n_responses desc, technology_id asc))[1:5] as top_mismatched_technologies

    from technology_mismatches
    group by task, model_id, arm, query_set, disability_group

),

joined as (

    select
        generation_groups.task,
        generation_groups.model_id,
        generation_groups.arm,
        generation_groups.query_set,
        generation_groups.disability_group,
        generation_groups.n_generations,
        generation_groups.n_responses,
        coalesce(aggregated.n_matched, 0) as n_matched,
        coalesce(aggregated.n_responses_recommending, 0) as n_responses_recommending,
        coalesce(aggregated.n_responses_with_any_partial, 0) as n_responses_with_any_partial,
        coalesce(aggregated.n_responses_with_any_mismatch, 0) as n_responses_with_any_mismatch,
        coalesce(aggregated.n_mentions, 0) as n_mentions,
        coalesce(aggregated.n_serves_mentions, 0) as n_serves_mentions,
        coalesce(aggregated.n_partial_mentions, 0) as n_partial_mentions,
        coalesce(aggregated.n_mismatched_mentions, 0) as n_mismatched_mentions,
        coalesce(top_mismatches.top_mismatched_technologies, cast([] as varchar[])) as top_mismatched_technologies,
        coalesce(aggregated.example_generation_ids, cast([] as varchar[])) as example_generation_ids

    from generation_groups
    left join aggregated
        on {{ join_keys(
            'generation_groups', 'aggregated',
            ['task', 'model_id', 'arm', 'query_set', 'disability_group'],
        ) }}
    left join top_mismatches
        on {{ join_keys(
            'generation_groups', 'top_mismatches',
            ['task', 'model_id', 'arm', 'query_set', 'disability_group'],
        ) }}

),

final as (

    select
        task,
        model_id,
        arm,
        query_set,
        disability_group,
        n_generations,
        n_responses,
        n_matched,
        n_responses_recommending,
        n_responses_with_any_partial,
        n_responses_with_any_mismatch,
        -- null, not 0, when nothing was matched (or nothing recommended)
        100.0 * cast(n_responses_with_any_mismatch as double) / nullif(n_matched, 0) as mismatch_pct,
        100.0 * cast(n_responses_with_any_mismatch as double) / nullif(n_responses_recommending, 0)
            as mismatch_pct_of_recommending,
        n_mentions,
        n_serves_mentions,
        n_partial_mentions,
        n_mismatched_mentions,
        100.0 * cast(n_mismatched_mentions as double) / nullif(n_mentions, 0) as mismatched_mention_pct,
        top_mismatched_technologies,
        example_generation_ids

    from joined

)

select * from final
