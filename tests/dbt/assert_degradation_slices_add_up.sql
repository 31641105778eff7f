-- Each breakdown (domain, disability, domain x disability) partitions the same
-- pairs as the overall row: its n_pairs, n_degraded and n_excluded add up to it.
with

degradation as (

    select * from {{ ref('degradation') }}

),

overall as (

    select * from degradation
    where slice = 'overall'

),

breakdowns as (

    select
        task,
        model_id,
        arm,
        query_set,
        metric,
        slice,
        sum(n_pairs) as n_pairs,
        sum(n_degraded) as n_degraded,
        sum(n_excluded) as n_excluded

    from degradation
    where slice != 'overall'
    group by task, model_id, arm, query_set, metric, slice

),

final as (

    select
        breakdowns.*,
        overall.n_pairs as overall_n_pairs,
        overall.n_degraded as overall_n_degraded,
        overall.n_excluded as overall_n_excluded

    from breakdowns
    left join overall
        on breakdowns.task = overall.task
        and breakdowns.model_id = overall.model_id
        and breakdowns.arm = overall.arm
        and breakdowns.query_set = overall.query_set
        and breakdowns.metric = overall.metric
    where overall.n_pairs is distinct from breakdowns.n_pairs
        or overall.n_degraded is distinct from breakdowns.n_degraded
        or overall.n_excluded is distinct from breakdowns.n_excluded

)

select * from final
