{{ config(materialized='table') }}

with

queries as (

    select * from {{ ref('stg_seeds__queries') }}

),

disabilities as (

    select * from {{ ref('stg_seeds__disabilities') }}

),

external_queries as (

    select * from {{ ref('stg_raw__external_queries') }}

),

ableaudit_neutral as (

    select
        'ableaudit' as query_set,
        query_id,
        domain,
        persona,
        cast(null as varchar) as disability_id,
        'neutral' as condition,
        neutral_query as prompt_text

    from queries

),

ableaudit_disability as (

    select
        'ableaudit' as query_set,
        queries.query_id,
        queries.domain,
        queries.persona,
        disabilities.disability_id,
        'disability' as condition,
        replace(queries.disability_template, '{disability}', disabilities.query_phrase) as prompt_text

    from queries
    cross join disabilities

),

external as (

    select
        query_set,
        query_id,
        domain,
        persona,
        disability_id,
        condition,
        prompt_text

    from external_queries

),

unioned as (

    select * from ableaudit_neutral
    union all
    select * from ableaudit_disability
    union all
    select * from external

),

final as (

    select
        query_set || ':' || query_id || ':' || coalesce(disability_id, 'neutral') as prompt_id,
        query_set,
        query_id,
        domain,
        persona,
        disability_id,
        condition,
        prompt_text

    from unioned

)

select * from final
