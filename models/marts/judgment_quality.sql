{#
    How well each judge's output could be read, per judge, judge model and
    revision, kind, prompt version and source (judged or imported): verdicts
    by status, the parser's warnings (spans not found in response B, Yes
    without a span, the judge's own total differing from the rubric rule),
    and how many verdicts are in use (attached to at least one generation or
    pair as the judge's current verdict).
#}
with

judgments as (

    select * from {{ ref('stg_raw__judgments') }}

),

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

generation_judgments as (

    select * from {{ ref('int_generation_judgments') }}

),

pair_judgments as (

    select * from {{ ref('int_pair_judgments') }}

),

verdicts_in_use as (

    select judgment_id from generation_judgments
    union
    select judgment_id from pair_judgments
    where judgment_id is not null

),

flagged as (

    select
        judgments.*,
        verdicts_in_use.judgment_id is not null as is_in_use,
        -- the generations a verdict names must have landed, or it cannot attach anywhere
        case
            when judgments.judge_kind = 'rubric' then judged.generation_id is null
            else judged_neutral.generation_id is null or judged_disability.generation_id is null
        end as is_unattached

    from judgments
    left join verdicts_in_use
        on judgments.judgment_id = verdicts_in_use.judgment_id
    left join generations as judged
        on judgments.generation_id = judged.generation_id
    left join generations as judged_neutral
        on judgments.neutral_generation_id = judged_neutral.generation_id
    left join generations as judged_disability
        on judgments.disability_generation_id = judged_disability.generation_id

),

aggregated as (

    select
        judge_name,
        judge_model,
        judge_revision,
        judge_kind,
        prompt_version,
        source,
        count(*) as n_verdicts,
        count(case when verdict_status = 'call_error' then 1 end) as n_call_errors,
        count(case when verdict_status = 'parsed' then 1 end) as n_parsed,
        count(case when verdict_status = 'repaired' then 1 end) as n_repaired,
        count(case when verdict_status = 'unparseable' then 1 end) as n_unparseable,
        count(case when is_usable then 1 end) as n_usable,
        sum(n_spans_not_found) as n_spans_not_found,
        count(case when n_spans_not_found > 0 then 1 end) as n_verdicts_with_spans_not_found,
        sum(n_yes_without_spans) as n_yes_without_spans,
        count(case when n_score_mismatch > 0 then 1 end) as n_score_mismatch,
        count(case when n_judge_truncated > 0 then 1 end) as n_judge_truncated,
        count(case when is_in_use then 1 end) as n_in_use,
        count(case when is_unattached then 1 end) as n_unattached

    from flagged
    group by judge_name, judge_model, judge_revision, judge_kind, prompt_version, source

),

final as (

    select
        judge_name,
        judge_model,
        judge_revision,
        judge_kind,
        prompt_version,
        source,
        n_verdicts,
        n_call_errors,
        n_parsed,
        n_repaired,
        n_unparseable,
        n_usable,
        100.0 * cast(n_call_errors as double) / n_verdicts as call_error_pct,
        -- parse rates are over the calls that returned text
        100.0 * cast(n_parsed as double) / nullif(n_verdicts - n_call_errors, 0) as parsed_pct,
        100.0 * cast(n_repaired as double) / nullif(n_verdicts - n_call_errors, 0) as repaired_pct,
        100.0 * cast(n_unparseable as double) / nullif(n_verdicts - n_call_errors, 0) as unparseable_pct,
        100.0 * cast(n_usable as double) / n_verdicts as usable_pct,
        n_spans_not_found,
        n_verdicts_with_spans_not_found,
        n_yes_without_spans,
        n_score_mismatch,
        n_judge_truncated,
        n_in_use,
        n_unattached

    from aggregated

)

select * from final
