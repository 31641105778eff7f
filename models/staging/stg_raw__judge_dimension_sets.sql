{#
    raw.judge_dimension_sets, one row per prompt version: the definition of a user's
    dimension set that contrastive verdicts were asked on. Every landing of such verdicts
    lands the set with them; the copies of one prompt version are the same set (the version
    is a digest of it), and the first landed is kept.
#}
with

landed_sets as (

    select * from {{ source('raw', 'judge_dimension_sets') }}

),

ranked as (

    select
        *,
        row_number() over (partition by prompt_version order by created_at, landing_id) as copy_rank

    from landed_sets

),

final as (

    select
        prompt_version,
        dimension_set,
        definition,
        created_at as first_landed_at,
        landing_id

    from ranked
    where copy_rank = 1

)

select * from final
