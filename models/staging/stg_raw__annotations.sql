with

annotations as (

    select * from {{ source('raw', 'annotations') }}

),

final as (

    select
        annotation_id,
        item_id,
        item_kind,
        dimension,
        annotator_id,
        value,
        value_num,
        batch_id,
        source_file,
        loaded_at,
        landing_id

    from annotations

)

select * from final
