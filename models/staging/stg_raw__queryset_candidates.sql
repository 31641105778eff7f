with

candidates as (

    select * from {{ source('raw', 'queryset_candidates') }}

),

final as (

    select
        query_set,
        stage,
        candidate_id,
        domain,
        persona_id,
        persona,
        persona_description,
        neutral_query,
        disability_template,
        origin,
        generation_id,
        decision,
        reason,
        detail,
        created_at,
        landing_id

    from candidates

)

select * from final
