{#
    How often each assistive technology is mentioned and recommended, per task,
    model, arm, query set and disability group ('neutral' or a disability id),
    with its fit for that group: the automated form of AccessEval's n-gram
    analysis (D.1). Dense: every technology has a row in every group, so a
    technology a model never recommends for the disability it serves shows up
    as 0% ("lack of completeness", 5.1). Rates are over the answered responses
    the current matcher has seen (n_matched).
#}
with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

generation_assistive_tech as (

    select * from {{ ref('int_generation_assistive_tech') }}

),

technologies as (

    select * from {{ ref('assistive_technologies') }}

),

technology_disabilities as (

    select * from {{ ref('assistive_technology_disabilities') }}

),

generation_groups as (

    select
        task,
        model_id,
        arm,
        query_set,
        condition,
        {{ disability_group() }} as disability_group,
        disability_id,
        count(*) as n_generations,
        count(case when status = 'ok' then 1 end) as n_responses

    from generations
    group by task, model_id, arm, query_set, condition, disability_group, disability_id

),

not_matched as (

    select
        task,
        model_id,
        arm,
        query_set,
        condition,
        {{ disability_group() }} as disability_group,
        count(*) as n_not_matched

    from generation_assistive_tech
    where match_status = 'not_matched'
    group by task, model_id, arm, query_set, condition, disability_group

),

grid as (

    select
        generation_groups.*,
        technologies.technology_id,
        technologies.display_name as technology_name,
        technologies.category,
        case
            when generation_groups.condition = 'neutral' then 'neutral_query'
            when technology_disabilities.fit is null then 'mismatch'
            else technology_disabilities.fit
        end as fit

    from generation_groups
    cross join technologies
    left join technology_disabilities
        on technologies.technology_id = technology_disabilities.technology_id
        and generation_groups.disability_id = technology_disabilities.disability_id

),

mention_counts as (

    select
        task,
        model_id,
        arm,
        query_set,
        condition,
        {{ disability_group() }} as disability_group,
        technology_id,
        count(*) as n_mentioning,
        count(case when is_recommended then 1 end) as n_recommending,
        cast(sum(n_occurrences) as bigint) as n_occurrences,
        (list(generation_id order by generation_id) filter (where is_recommended))[1:3] as example_generation_ids

    from generation_assistive_tech
    where match_status = 'mentioned'
    group by task, model_id, arm, query_set, condition, disability_group, technology_id

),

counted as (

    select
        grid.task,
        grid.model_id,
        grid.arm,
        grid.query_set,
        grid.condition,
        grid.disability_group,
        grid.technology_id,
        grid.technology_name,
        grid.category,
        grid.fit,
        grid.n_generations,
        grid.n_responses,
        grid.n_responses - coalesce(not_matched.n_not_matched, 0) as n_matched,
        coalesce(mention_counts.n_mentioning, 0) as n_mentioning,
        coalesce(mention_counts.n_recommending, 0) as n_recommending,
        coalesce(mention_counts.n_occurrences, 0) as n_occurrences,
        coalesce(mention_counts.example_generation_ids, cast([] as varchar[])) as example_generation_ids

    from grid
    left join not_matched
        on {{ join_keys(
            'grid', 'not_matched',
            ['task', 'model_id', 'arm', 'query_set', 'condition', 'disability_group'],
        ) }}
    left join mention_counts
        on {{ join_keys(
            'grid', 'mention_counts',
            ['task', 'model_id', 'arm', 'query_set', 'condition', 'disability_group', 'technology_id'],
        ) }}

),

final as (

    select
        task,
        model_id,
        arm,
        query_set,
        condition,
        disability_group,
        technology_id,
        technology_name,
        category,
        fit,
        n_generations,
        n_responses,
        n_matched,
        n_mentioning,
        n_mentioning - n_recommending as n_negated_only,
        n_recommending,
        n_occurrences,
        -- null, not 0, when no response was matched
        100.0 * cast(n_mentioning as double) / nullif(n_matched, 0) as mention_pct,
        100.0 * cast(n_recommending as double) / nullif(n_matched, 0) as recommend_pct,
        case when fit = 'mismatch' then n_recommending else 0 end as n_mismatch,
        example_generation_ids

    from counted

)

select * from final
