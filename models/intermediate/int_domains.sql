{{ config(materialized='table') }}

with

seed_domains as (

    select * from {{ ref('stg_seeds__domains') }}

),

built_domains as (

    select * from {{ ref('stg_raw__queryset_domains') }}

),

project as (

    select
        domain_id,
        display_name,
        sort_order,
        'seed' as origin

    from seed_domains

),

built as (

    select
        domain_id,
        any_value(domain_id) as display_name,
        cast(null as integer) as sort_order,
        'queryset' as origin

    from built_domains
    where domain_id not in (select project.domain_id from project)
    group by domain_id

),

final as (

    select * from project
    union all
    select * from built

)

select * from final
