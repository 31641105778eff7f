with

disabilities as (

    select * from {{ ref('disabilities') }}

),

final as (

    select
        disability_id,
        display_name,
        short_name,
        query_phrase,
        sort_order

    from disabilities

)

select * from final
