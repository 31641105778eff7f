with

domains as (

    select * from {{ source('raw', 'queryset_domains') }}

),

final as (

    select
        query_set,
        domain_id,
        description,
        landing_id

    from domains

)

select * from final
