with

queries as (

    select * from {{ ref('queries') }}

),

final as (

    select
        query_id,
        domain,
        persona,
        neutral_query,
        disability_template

    from queries

)

select * from final
