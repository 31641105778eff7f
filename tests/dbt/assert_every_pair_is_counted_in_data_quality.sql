-- Nothing silently dropped: per model, arm and metric, the pairs counted in the
-- degradation rate plus those excluded equal the pairs int_pairs holds.
with

pairs as (

    select * from {{ ref('int_pairs') }}

),

data_quality as (

    select * from {{ ref('data_quality') }}

),

pair_totals as (

    select
        task,
        model_id,
        arm,
        query_set,
        count(*) as n_pairs

    from pairs
    group by task, model_id, arm, query_set

),

rate_totals as (

    select
        task,
        model_id,
        arm,
        query_set,
        metric,
        sum(n_rows) as n_rows

    from data_quality
    where area = 'rate'
    group by task, model_id, arm, query_set, metric

),

final as (

    select
        rate_totals.*,
        pair_totals.n_pairs

    from rate_totals
    left join pair_totals
        on rate_totals.task = pair_totals.task
        and rate_totals.model_id = pair_totals.model_id
        and rate_totals.arm = pair_totals.arm
        and rate_totals.query_set = pair_totals.query_set
    where rate_totals.n_rows is distinct from pair_totals.n_pairs

)

select * from final
