-- Every score lies on its metric's scale (seed `metrics`; a null bound is open).
with

generation_scores as (

    select * from {{ ref('int_generation_scores') }}

),

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

final as (

    select
        generation_scores.*,
        metrics.scale_min,
        metrics.scale_max

    from generation_scores
    inner join metrics
        on generation_scores.metric = metrics.metric
    where generation_scores.score < metrics.scale_min
        or generation_scores.score > metrics.scale_max

)

select * from final
