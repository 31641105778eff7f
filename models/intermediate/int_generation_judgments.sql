{#
    Rubric verdicts attached to generations. A verdict is keyed by content: its
    generation_id names the FIRST generation judged with that query, response,
    condition and disability, and the judge would have said the same of every
    other generation with the same texts (a greedy second sample, another model
    giving the same answer). So a verdict attaches to every generation whose
    prompt_text, response_text, condition and disability_id equal those of the
    generation it names (null-safe). This join happens here, once.

    One verdict per generation and judge: when a judge has several (its model,
    decoding or prompt version changed between runs), the latest landed one is
    the judge's current verdict; n_candidate_verdicts says how many there were.
#}

-- read by several marts and data tests: joined once per build, not on every read
{{ config(materialized='table') }}

with

judgments as (

    select * from {{ ref('stg_raw__judgments') }}
    where judge_kind = 'rubric'

),

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

verdict_subjects as (

    -- a verdict whose generation has not landed has no content to attach by (counted in judgment_quality)
    select
        judgments.*,
        judged.prompt_text as subject_prompt_text,
        judged.response_text as subject_response_text,
        judged.condition as subject_condition,
        judged.disability_id as subject_disability_id

    from judgments
    inner join generations as judged
        on judgments.generation_id = judged.generation_id

),

attached as (

    select
        generations.generation_id,
        verdict_subjects.judge_name,
        verdict_subjects.judgment_id,
        verdict_subjects.generation_id as judged_generation_id,
        verdict_subjects.judge_model,
        verdict_subjects.judge_revision,
        verdict_subjects.prompt_version,
        verdict_subjects.verdict_status,
        verdict_subjects.is_usable,
        verdict_subjects.score,
        verdict_subjects.declined,
        verdict_subjects.parse_notes,
        verdict_subjects.error_message,
        verdict_subjects.created_at

    from verdict_subjects
    inner join generations
        on verdict_subjects.subject_prompt_text = generations.prompt_text
        and verdict_subjects.subject_response_text is not distinct from generations.response_text
        and verdict_subjects.subject_condition = generations.condition
        and verdict_subjects.subject_disability_id is not distinct from generations.disability_id

),

ranked as (

    select
        *,
        row_number() over (
            partition by generation_id, judge_name
            order by created_at desc, judgment_id desc
        ) as verdict_rank,
        count(*) over (partition by generation_id, judge_name) as n_candidate_verdicts

    from attached

),

final as (

    select
        generation_id,
        judge_name,
        judgment_id,
        judged_generation_id,
        judge_model,
        judge_revision,
        prompt_version,
        verdict_status,
        is_usable,
        score,
        declined,
        parse_notes,
        error_message,
        n_candidate_verdicts,
        created_at as judged_at

    from ranked
    where verdict_rank = 1

)

select * from final
