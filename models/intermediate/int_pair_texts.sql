{#
    The texts of every pair, joined here once: each pair of int_pairs with the
    prompt and the response of its neutral and of its disability-aware
    generation (null on the side that has not landed). The contrastive judges,
    the detector, int_pair_judgments and preference_pairs read their pair texts
    from this model. A table built incrementally (docs/incremental.md): a build
    joins again only the pairs of units that generations of new landings answer.
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='delete+insert',
        unique_key='pair_id',
        on_schema_change='sync_all_columns',
        pre_hook="{{ incremental_reset(upstream='int_pairs') }}",
        post_hook=["{{ incremental_record(upstream='int_pairs') }}", "{{ record_group_fingerprints() }}"],
    )
}}
{%- set plan = incremental_plan(upstream='int_pairs') %}

with

all_pairs as (

    select * from {{ ref('int_pairs') }}

),

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

pairs as (

    {{ incremental_scope('all_pairs', 'generations', plan) }}

),

with_texts as (

    select
        pairs.*,
        neutral.source as neutral_source,
        neutral.prompt_text as neutral_prompt_text,
        neutral.response_text as neutral_response_text,
        disability.source as disability_source,
        disability.system_prompt as disability_system_prompt,
        disability.adapter as disability_adapter,
        disability.prompt_text as disability_prompt_text,
        disability.response_text as disability_response_text

    from pairs
    left join generations as neutral
        on pairs.neutral_generation_id = neutral.generation_id
    left join generations as disability
        on pairs.disability_generation_id = disability.generation_id

),

final as (

    select
        {{ pair_columns() }}
        neutral_generation_id,
        disability_generation_id,
        neutral_status,
        disability_status,
        pair_status,
        run_id,
        neutral_source,
        neutral_prompt_text,
        neutral_response_text,
        disability_source,
        disability_system_prompt,
        disability_adapter,
        disability_prompt_text,
        disability_response_text

    from with_texts

)

-- a neutral answer is in one pair per disability: pairs side by side by their neutral
-- generation let DuckDB store each neutral answer once per segment, and the models that
-- read this one in its order (pair_details) store theirs the same way
select * from final
order by model_id, neutral_generation_id
