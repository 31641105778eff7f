{#
    How an image set was filtered (VLM paper section 6.2: COCO images with one
    visible person). Per image set, the images the loader considered, how many
    each rule dropped, and how many it kept, from raw.image_candidates (one row
    per considered image, landed by `ableaudit import coco`). The rules and
    their order are the loader's (ableaudit.ingest.coco.DROP_REASONS): an image
    is counted under the first rule it fails. Image sets landed without a filter
    (PAIRS, a manifest) have no rows here.
#}
with

candidates as (

    select * from {{ source('raw', 'image_candidates') }}

),

considered as (

    select
        image_set,
        1 as stage_order,
        'considered' as funnel_stage,
        cast(null as varchar) as reason,
        count(*) as n_images

    from candidates
    group by image_set

),

dropped as (

    select
        image_set,
        2 as stage_order,
        'dropped' as funnel_stage,
        reason,
        count(*) as n_images

    from candidates
    where outcome = 'dropped'
    group by image_set, reason

),

kept as (

    select
        image_set,
        3 as stage_order,
        'kept' as funnel_stage,
        cast(null as varchar) as reason,
        count(*) as n_images

    from candidates
    where outcome = 'kept'
    group by image_set

),

stages as (

    select * from considered
    union all
    select * from dropped
    union all
    select * from kept

),

final as (

    select
        stages.image_set,
        stages.stage_order,
        stages.funnel_stage,
        stages.reason,
        stages.n_images,
        100.0 * stages.n_images / considered.n_images as pct_of_considered

    from stages
    inner join considered
        on stages.image_set = considered.image_set

)

select * from final
