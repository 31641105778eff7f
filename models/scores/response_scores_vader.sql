{#
    VADER compound per distinct response text and scorer version. Incremental:
    a build scores only texts that have no row yet for the current version, so
    a rebuild recomputes nothing unchanged (DESIGN principle 8).
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

    {{ texts_to_score('generations', 'vader') }}

),

scored as (

    select
        text_hash,
        {{ current_scorer_version('vader') }} as scorer_version,
        vader_compound(response_text) as vader_compound,
        'ok' as status,
        current_timestamp as scored_at

    from pending

)

select * from scored
