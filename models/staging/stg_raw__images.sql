with

images as (

    select * from {{ source('raw', 'images') }}

),

final as (

    select
        image_set,
        image_id,
        rel_path,
        sha256 as image_sha256,
        width,
        height,
        scenario,
        category,
        gender,
        race,
        -- the intersection, as one group label (group_bias reports it beside gender and race)
        gender || ' x ' || race as gender_race,
        extra_json,
        loader,
        source,
        loaded_at,
        landing_id

    from images

)

select * from final
