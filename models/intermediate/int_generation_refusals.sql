{#
    One row per generation: is it a refusal, and who says so. A generation is a
    refusal (refused) when any source that assessed it flags it; refusal_source
    lists every source that does ('rule:<rule id>', 'judge:<judge>:rubric',
    'judge:<judge>:contrastive'), so agreement is visible. One boolean per
    source kind, null when no source of that kind assessed the generation.
    Generations that are not 'ok' (error, empty) are not assessed: refused is null.
#}
{#- its rows of a model come from that model's rows of each input with a model_id (macro record_group_local_view) -#}
{{ config(post_hook="{{ record_group_local_view() }}") }}
with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

flags as (

    select * from {{ ref('int_generation_refusal_flags') }}

),

per_generation as (

    -- model_id is fixed by generation_id; grouping and joining on it as well lets a filter on
    -- the model (a publish, a BI query) reach the scans of the flags
    select
        generation_id,
        model_id,
        bool_or(refused) as refused,
        -- the refusing sources in the order of their names (a generation has at most one rule
        -- row, so this is the order of source, refusal_rule); a sorted list, where an ordered
        -- string_agg sorted each of a million groups on its own at twice the cost
        array_to_string(
            list_sort(
                list(coalesce('rule:' || refusal_rule, source)) filter (where refused)
            ),
            ', '
        ) as refusal_source,
        count(*) as n_sources,
        count(case when refused then 1 end) as n_sources_refused,
        bool_or(case when source_kind = 'rule' then refused end) as refused_by_rule,
        max(refusal_rule) as refusal_rule,
        bool_or(case when source_kind = 'judge_rubric' then refused end) as refused_by_rubric_judge,
        bool_or(case when source_kind = 'judge_contrastive' then refused end) as refused_by_contrastive_judge

    from flags
    group by generation_id, model_id

),

final as (

    select
        generations.generation_id,
        generations.run_id,
        generations.task,
        generations.model_id,
        generations.arm,
        generations.query_set,
        generations.query_id,
        generations.domain,
        generations.condition,
        generations.disability_id,
        generations.status,
        per_generation.generation_id is not null as is_assessed,
        per_generation.refused,
        per_generation.refusal_source,
        coalesce(per_generation.n_sources, 0) as n_sources,
        coalesce(per_generation.n_sources_refused, 0) as n_sources_refused,
        per_generation.refused_by_rule,
        per_generation.refusal_rule,
        per_generation.refused_by_rubric_judge,
        per_generation.refused_by_contrastive_judge

    from generations
    left join per_generation
        on generations.generation_id = per_generation.generation_id
        and generations.model_id = per_generation.model_id

)

select * from final
