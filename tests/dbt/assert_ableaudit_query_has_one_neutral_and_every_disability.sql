-- Every query of the ableaudit set has exactly one neutral prompt and one prompt
-- per disability category (9): a query with fewer would silently shrink a slice.
with

prompts as (

    select * from {{ ref('int_prompts') }}
    where query_set = 'ableaudit'

),

disabilities as (

    select * from {{ ref('stg_seeds__disabilities') }}

),

per_query as (

    select
        query_id,
        count(case when condition = 'neutral' then 1 end) as n_neutral,
        count(distinct case when condition = 'disability' then disability_id end) as n_disability_ids,
        count(case when condition = 'disability' then 1 end) as n_disability

    from prompts
    group by query_id

),

final as (

    select per_query.*
    from per_query
    where
        per_query.n_neutral != 1
        or per_query.n_disability != 9
        or per_query.n_disability_ids != (select count(*) from disabilities)

)

select * from final
