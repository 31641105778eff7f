{#
    Pairing happens here, once, for the current state (the latest answer of
    each unit; int_run_pairs pairs within each run and model revision with
    the same keys and status rule). Each disability-aware
    generation is paired with the neutral generation of the same task, model,
    arm, query, temperature and sample. Every disability-aware generation gets a
    row, complete or not: an incomplete pair carries a status instead of vanishing.

    A table built incrementally (docs/incremental.md): a build pairs again only
    the units that generations of new landings answer.
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='delete+insert',
        unique_key='pair_id',
        on_schema_change='sync_all_columns',
        pre_hook="{{ incremental_reset(upstream='stg_raw__generations') }}",
        post_hook=["{{ incremental_record(upstream='stg_raw__generations') }}", "{{ record_group_fingerprints() }}"],
    )
}}
{%- set plan = incremental_plan(upstream='stg_raw__generations') %}

with

-- inlined where it is read: materialised, DuckDB would copy every text of it first
all_landed as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

landed as (

    {{ incremental_scope('all_landed', 'all_landed', plan) }}

),

generations as (

    -- the current state: the latest answer of each unit (an earlier run's answer to the
    -- same prompt, e.g. of another model revision, stays in int_run_pairs)
    {{ latest_answers('landed') }}

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
        on {{ join_keys('disability', 'neutral', pair_unit_keys(), nullable=['temperature']) }}

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
        {{ pair_status() }} as pair_status,
        run_id

    from paired

)

select * from final
