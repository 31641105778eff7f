{#
    Word count per distinct response text and scorer version, incremental like
    response_scores_vader (cheap, but the same pattern keeps every scorer alike).
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'scorer_version'],
        on_schema_change='fail',
    )
}}

with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

pending as (

    {{ texts_to_score('generations', 'verbosity') }}

),

scored as (

    select
        text_hash,
        {{ current_scorer_version('verbosity') }} as scorer_version,
        word_count(response_text) as word_count,
        'ok' as status,
        current_timestamp as scored_at

    from pending

)

select * from scored
