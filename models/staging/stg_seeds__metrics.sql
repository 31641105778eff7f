with

metrics as (

    select * from {{ ref('metrics') }}

),

final as (

    select
        metric,
        display_name,
        direction,
        scale_min,
        scale_max,
        truncated_pairs,
        description

    from metrics

)

select * from final
