with

builds as (

    select * from {{ source('raw', 'queryset_builds') }}

),

final as (

    select
        query_set,
        name,
        version,
        generator_model,
        generator_revision,
        backend,
        prompt_version,
        seed,
        status,
        published_at,
        created_at,
        landing_id

    from builds

)

select * from final
