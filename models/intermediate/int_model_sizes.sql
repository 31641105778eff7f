{#
    The size of each audited model, in billions of parameters, for the scaling
    mart. Two sources: `params_b` of a target in an audit config (raw.runs,
    targets[].params_b, named by coalesce(model_id, name) as in every mart), the
    latest run that states one winning; and the seed model_sizes, which
    overrides the configs (sizes of imported models, or corrections).
#}
with

runs as (

    select * from {{ source('raw', 'runs') }}

),

model_sizes_seed as (

    select * from {{ ref('model_sizes') }}

),

run_targets as (

    select
        runs.run_id,
        runs.started_at,
        unnest(cast(json_extract(runs.config_json, '$.targets') as json[])) as target

    from runs
    where
        json_valid(runs.config_json)
        and json_type(runs.config_json, '$.targets') = 'ARRAY'

),

config_sizes as (

    select
        coalesce(target ->> 'model_id', target ->> 'name') as model_id,
        try_cast(target ->> 'params_b' as double) as params_b,
        run_id,
        started_at

    from run_targets

),

latest_config_sizes as (

    select
        model_id,
        params_b,
        run_id

    from config_sizes
    where
        model_id is not null
        and params_b is not null
    qualify row_number() over (
        partition by model_id order by started_at desc, run_id desc
    ) = 1

),

seed_sizes as (

    select
        cast(model_id as varchar) as model_id,
        cast(params_b as double) as params_b

    from model_sizes_seed
    where
        model_id is not null
        and params_b is not null

),

final as (

    select
        seed_sizes.model_id,
        seed_sizes.params_b,
        'seed' as size_source,
        cast(null as varchar) as run_id

    from seed_sizes

    union all

    select
        latest_config_sizes.model_id,
        latest_config_sizes.params_b,
        'config' as size_source,
        latest_config_sizes.run_id

    from latest_config_sizes
    where latest_config_sizes.model_id not in (select seed_sizes.model_id from seed_sizes)

)

select * from final
