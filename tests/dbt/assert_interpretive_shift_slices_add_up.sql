-- Each breakdown (domain, disability, domain x disability) of interpretive_shift
-- partitions the same pairs as the overall row, per judge and dimension.
with

interpretive_shift as (

    select * from {{ ref('interpretive_shift') }}

),

overall as (

    select * from interpretive_shift
    where slice = 'overall'

),

breakdowns as (

    select
        task,
        model_id,
        arm,
        query_set,
        judge_name,
        dimension,
        slice,
        sum(n_pairs_judged) as n_pairs_judged,
        sum(n_yes) as n_yes,
        sum(n_ambiguous) as n_ambiguous,
        sum(n_excluded) as n_excluded

    from interpretive_shift
    where slice != 'overall'
    group by task, model_id, arm, query_set, judge_name, dimension, slice

),

final as (

    select
        breakdowns.*,
        overall.n_pairs_judged as overall_n_pairs_judged

    from breakdowns
    left join overall
        on breakdowns.task = overall.task
        and breakdowns.model_id = overall.model_id
        and breakdowns.arm = overall.arm
        and breakdowns.query_set = overall.query_set
        and breakdowns.judge_name = overall.judge_name
        and breakdowns.dimension = overall.dimension
    where overall.n_pairs_judged is distinct from breakdowns.n_pairs_judged
        or overall.n_yes is distinct from breakdowns.n_yes
        or overall.n_ambiguous is distinct from breakdowns.n_ambiguous
        or overall.n_excluded is distinct from breakdowns.n_excluded

)

select * from final
