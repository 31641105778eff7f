{{ config(materialized='table') }}

with

candidates as (

    select * from {{ ref('stg_raw__queryset_candidates') }}

),

reviews as (

    select * from {{ ref('stg_raw__queryset_reviews') }}

),

external_queries as (

    select * from {{ ref('stg_raw__external_queries') }}

),

builds as (

    select * from {{ ref('stg_raw__queryset_builds') }}

),

generations as (

    select * from {{ ref('stg_raw__queryset_generations') }}

),

validated as (

    select
        query_set,
        stage as funnel_stage,
        case stage when 'personas' then 1 else 2 end as stage_order,
        domain,
        'generated' as outcome,
        cast(null as varchar) as reason,
        count(*) as n

    from candidates
    group by query_set, stage, domain

    union all

    select
        query_set,
        stage as funnel_stage,
        case stage when 'personas' then 1 else 2 end as stage_order,
        domain,
        decision as outcome,
        reason,
        count(*) as n

    from candidates
    group by query_set, stage, domain, decision, reason

),

failed as (

    select
        query_set,
        stage as funnel_stage,
        case stage when 'personas' then 1 else 2 end as stage_order,
        domain,
        'failed' as outcome,
        cast(null as varchar) as reason,
        count(*) as n

    from generations
    where status = 'error' and stage in ('personas', 'queries')
    group by query_set, stage, domain

),

kept_queries as (

    select
        candidates.query_set,
        candidates.domain,
        reviews.decision as review_decision

    from candidates
    left join reviews
        on
        candidates.query_set = reviews.query_set
        and candidates.candidate_id = reviews.candidate_id
    where candidates.stage = 'queries' and candidates.decision = 'kept'

),

reviewed as (

    select
        query_set,
        'review' as funnel_stage,
        3 as stage_order,
        domain,
        case
            when review_decision is null then 'pending'
            when review_decision = 'reject' then 'removed'
            else 'kept'
        end as outcome,
        case when review_decision = 'reject' then 'rejected_in_review' end as reason,
        count(*) as n

    from kept_queries
    group by all

    union all

    select
        query_set,
        'review' as funnel_stage,
        3 as stage_order,
        domain,
        'generated' as outcome,
        cast(null as varchar) as reason,
        count(*) as n

    from kept_queries
    group by query_set, domain

),

published as (

    select
        external_queries.query_set,
        'published' as funnel_stage,
        4 as stage_order,
        external_queries.domain,
        'kept' as outcome,
        cast(null as varchar) as reason,
        count(*) as n

    from external_queries
    inner join builds on external_queries.query_set = builds.query_set
    where external_queries.condition = 'neutral'
    group by external_queries.query_set, external_queries.domain

),

unioned as (

    select * from validated
    union all
    select * from failed
    union all
    select * from reviewed
    union all
    select * from published

),

final as (

    select
        query_set,
        funnel_stage,
        stage_order,
        domain,
        outcome,
        reason,
        n

    from unioned

)

select * from final
