-- Every score, a judge's and a masked scorer's included, lies on the scale of its base
-- metric (seed `metrics`; a null bound is open): judge_score:<judge> rows must be 1..10. A
-- score whose base metric the seed does not define fails too (it has no scale).
with

generation_scores as (

    select
        generation_id,
        metric,
        base_metric,
        judge_name,
        score,
        score_status

    from {{ ref('int_generation_scores') }}

    union all

    select
        generation_id,
        metric,
        metric as base_metric,
        null as judge_name,
        score,
        score_status

    from {{ ref('int_generation_masked_scores') }}

),

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

final as (

    select
        generation_scores.generation_id,
        generation_scores.metric,
        generation_scores.base_metric,
        generation_scores.judge_name,
        generation_scores.score,
        generation_scores.score_status,
        metrics.scale_min,
        metrics.scale_max

    from generation_scores
    left join metrics
        on generation_scores.base_metric = metrics.metric
    where
        generation_scores.score is not null
        and (
            metrics.metric is null
            or generation_scores.score < metrics.scale_min
            or generation_scores.score > metrics.scale_max
        )

)

select * from final
