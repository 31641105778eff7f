with

domains as (

    select * from {{ ref('domains') }}

),

final as (

    select
        domain_id,
        display_name,
        sort_order

    from domains

)

select * from final
