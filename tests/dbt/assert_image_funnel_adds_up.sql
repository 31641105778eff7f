-- Nothing silently dropped: per image set, the dropped images and the kept ones add
-- up to those considered, and the kept ones are the set's raw.images rows.
with

funnel as (

    select * from {{ ref('image_funnel') }}

),

images as (

    select * from {{ ref('stg_raw__images') }}

),

per_set as (

    select
        image_set,
        sum(case when funnel_stage = 'considered' then n_images else 0 end) as n_considered,
        sum(case when funnel_stage = 'dropped' then n_images else 0 end) as n_dropped,
        sum(case when funnel_stage = 'kept' then n_images else 0 end) as n_kept

    from funnel
    group by image_set

),

landed as (

    select
        image_set,
        count(*) as n_landed

    from images
    group by image_set

),

final as (

    select
        per_set.*,
        coalesce(landed.n_landed, 0) as n_landed

    from per_set
    left join landed
        on per_set.image_set = landed.image_set
    where
        per_set.n_dropped + per_set.n_kept != per_set.n_considered
        or per_set.n_kept != coalesce(landed.n_landed, 0)

)

select * from final
