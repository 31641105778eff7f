{#
    Every metric: those the scorers declare (stg_registry__scorers, from the
    registry) and the others, kept in seed `metrics` (judge_score).
#}
with

seeded as (

    select * from {{ ref('metrics') }}

),

declared as (

    select * from {{ ref('stg_registry__scorers') }}
    where metric is not null

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

    from declared

    union all

    select
        metric,
        display_name,
        direction,
        scale_min,
        scale_max,
        truncated_pairs,
        description

    from seeded

)

select * from final
