{#
    Pairs per run and per model revision: the same pairing as int_pairs (keys
    pair_unit_keys, status pair_status), formed within one cohort's own answers.
    A cohort is a run (cohort_kind 'run', cohort_id = run_id: the answers the
    run landed) or a model revision (cohort_kind 'revision', cohort_id =
    model_revision: every answer of that revision, whichever run landed it).
    Within a cohort the latest answer of each unit counts. pair_id is int_pairs'
    pair_id, so the same unit is matched across cohorts by it.
#}
with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

runs as (

    select * from {{ source('raw', 'runs') }}

),

cohort_answers as (

    select
        'run' as cohort_kind,
        run_id as cohort_id,
        *
    from generations
    where run_id is not null
    union all
    select
        'revision' as cohort_kind,
        model_revision as cohort_id,
        *
    from generations
    where model_revision is not null

),

dated_answers as (

    -- a cohort's start orders it among its target's cohorts: the run's start as raw.runs
    -- records it, else (an import, a revision) when its first answer landed
    select
        cohort_answers.*,
        coalesce(
            case when cohort_answers.cohort_kind = 'run' then runs.started_at end,
            min(cohort_answers.created_at) over (
                partition by cohort_answers.cohort_kind, cohort_answers.cohort_id
            )
        ) as cohort_started_at

    from cohort_answers
    left join runs
        on cohort_answers.run_id = runs.run_id

),

latest_answers as (

    {{ latest_answers('dated_answers', within=['cohort_kind', 'cohort_id']) }}

),

disability as (

    select * from latest_answers
    where condition = 'disability'

),

neutral as (

    select * from latest_answers
    where condition = 'neutral'

),

paired as (

    select
        disability.cohort_kind,
        disability.cohort_id,
        disability.cohort_started_at,
        disability.task,
        disability.model_id,
        disability.arm,
        disability.query_set,
        disability.query_id,
        coalesce(disability.domain, neutral.domain) as domain,
        disability.disability_id,
        disability.temperature,
        disability.sample_index,
        neutral.generation_id as neutral_generation_id,
        disability.generation_id as disability_generation_id,
        neutral.status as neutral_status,
        disability.status as disability_status,
        neutral.finish_reason as neutral_finish_reason,
        disability.finish_reason as disability_finish_reason,
        disability.run_id,
        disability.model_revision

    from disability
    left join neutral
        on disability.cohort_kind = neutral.cohort_kind
        and disability.cohort_id = neutral.cohort_id
        and {{ join_keys('disability', 'neutral', pair_unit_keys(), nullable=['temperature']) }}

),

final as (

    select
        cohort_kind,
        cohort_id,
        cohort_started_at,
        {{ hash_key([
            'task', 'model_id', 'arm', 'query_set', 'query_id', 'disability_id', 'temperature', 'sample_index',
        ]) }} as pair_id,
        task,
        model_id,
        arm,
        query_set,
        query_id,
        domain,
        disability_id,
        temperature,
        sample_index,
        neutral_generation_id,
        disability_generation_id,
        neutral_status,
        disability_status,
        coalesce(neutral_finish_reason = 'length' or disability_finish_reason = 'length', false) as truncated,
        {{ pair_status() }} as pair_status,
        run_id,
        model_revision

    from paired

)

select * from final
