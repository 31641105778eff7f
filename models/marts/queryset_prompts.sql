{{ config(materialized='table') }}

with

prompts as (

    select * from {{ ref('int_prompts') }}

),

builds as (

    select * from {{ ref('stg_raw__queryset_builds') }}

),

final as (

    select
        prompts.prompt_id,
        prompts.query_set,
        prompts.query_id,
        prompts.domain,
        prompts.persona,
        prompts.disability_id,
        prompts.condition,
        prompts.prompt_text,
        builds.name as query_set_name,
        builds.version as query_set_version,
        builds.generator_model,
        builds.generator_revision,
        builds.prompt_version,
        builds.seed,
        builds.published_at

    from prompts
    inner join builds on prompts.query_set = builds.query_set

)

select * from final
