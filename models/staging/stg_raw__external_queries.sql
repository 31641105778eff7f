with

external_queries as (

    select * from {{ source('raw', 'external_queries') }}

),

final as (

    select
        query_set,
        query_id,
        domain,
        persona,
        disability_id,
        case when disability_id is null then 'neutral' else 'disability' end as condition,
        prompt_text,
        source_file,
        loaded_at,
        landing_id

    from external_queries

)

select * from final
