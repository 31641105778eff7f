{#
    Pairing happens here, once. Each disability-aware
    generation is paired with the neutral generation of the same task, model,
    arm, query, temperature and sample. Every disability-aware generation gets a
    row, complete or not: an incomplete pair carries a status instead of vanishing.
#}
with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

disability as (

    select * from generations
    where condition = 'disability'

),

neutral as (

    select * from generations
    where condition = 'neutral'

),

paired as (

    select
        disability.task,
        disability.model_id,
        disability.arm,
        disability.query_set,
        disability.query_id,
        coalesce(disability.domain, neutral.domain) as domain,
        disability.disability_id,
        disability.temperature,
        disability.sample_index,
        neutral.generation_id as neutral_generation_id,
        disability.generation_id as disability_generation_id,
        neutral.status as neutral_status,
        disability.status as disability_status,
        neutral.finish_reason as neutral_finish_reason,
        disability.finish_reason as disability_finish_reason,
        disability.run_id

    from disability
    left join neutral
        on {{ join_keys(
            'disability', 'neutral',
            ['task', 'model_id', 'arm', 'query_set', 'query_id', 'temperature', 'sample_index'],
            nullable=['temperature'],
        ) }}

),

final as (

    select
        {{ hash_key([
            'task', 'model_id', 'arm', 'query_set', 'query_id', 'disability_id', 'temperature', 'sample_index',
        ]) }} as pair_id,
        task,
        model_id,
        arm,
        query_set,
        query_id,
        domain,
        disability_id,
        temperature,
        sample_index,
        neutral_generation_id,
        disability_generation_id,
        neutral_status,
        disability_status,
        neutral_finish_reason,
        disability_finish_reason,
        -- an answer stopped by the token cap: metrics that cannot read it exclude the pair (seed metrics)
        coalesce(neutral_finish_reason = 'length' or disability_finish_reason = 'length', false) as truncated,
        -- the first problem found names the pair's status; neutral-side problems first
        case
            when neutral_generation_id is null then 'missing_neutral'
            when neutral_status = 'error' then 'neutral_error'
            when neutral_status = 'empty' then 'neutral_empty'
            when disability_status = 'error' then 'disability_error'
            when disability_status = 'empty' then 'disability_empty'
            when neutral_status = 'ok' and disability_status = 'ok' then 'complete'
            else 'unknown_status'
        end as pair_status,
        run_id

    from paired

)

select * from final
