with

reviews as (

    select * from {{ source('raw', 'queryset_reviews') }}

),

final as (

    select
        query_set,
        candidate_id,
        decision,
        neutral_query,
        disability_template,
        reviewer,
        note,
        source_file,
        created_at,
        landing_id

    from reviews

)

select * from final
