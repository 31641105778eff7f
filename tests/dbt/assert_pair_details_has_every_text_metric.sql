-- Every text metric of seed `metrics` (all but the judges' judge_score) has its
-- columns in pair_details: a metric added to the seed fails here until the mart
-- shows it beside the others.
with

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

detail_columns as (

    select column_name
    from information_schema.columns
    where
        table_schema = '{{ ref('pair_details').schema }}'
        and table_name = '{{ ref('pair_details').identifier }}'

),

final as (

    select metrics.metric

    from metrics
    where
        metrics.metric != 'judge_score'
        and (
            'neutral_' || metrics.metric not in (select detail_columns.column_name from detail_columns)
            or metrics.metric || '_included' not in (select detail_columns.column_name from detail_columns)
        )

)

select * from final
