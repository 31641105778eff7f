with

generations as (

    select * from {{ source('raw', 'queryset_generations') }}

),

final as (

    select
        generation_id,
        query_set,
        stage,
        domain,
        persona_id,
        generator_model,
        generator_revision,
        backend,
        prompt_version,
        seed,
        temperature,
        max_new_tokens,
        structured,
        status,
        error_message,
        created_at,
        landing_id

    from generations

)

select * from final
