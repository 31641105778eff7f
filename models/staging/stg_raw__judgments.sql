{#
    raw.judgments, one row per verdict, with the one rule that decides whether a
    verdict may feed a metric (is_usable: the call succeeded and the parser read
    a valid verdict) and the verdict's fields as typed columns. The typed fields
    are null unless the verdict is usable: an unparseable verdict or a failed
    call can never become a score, a label or a "No".
#}
with

judgments as (

    select * from {{ source('raw', 'judgments') }}

),

statused as (

    select
        *,
        -- the call's failure first, else what the parser made of the judge's text
        case when call_status = 'error' then 'call_error' else parse_status end as verdict_status,
        coalesce(call_status = 'ok' and parse_status in ('parsed', 'repaired'), false) as is_usable

    from judgments

),

final as (

    select
        judgment_id,
        judge_kind,
        judge_name,
        judge_model,
        judge_revision,
        prompt_version,
        generation_id,
        neutral_generation_id,
        disability_generation_id,
        subject_hash,
        call_status,
        parse_status,
        verdict_status,
        is_usable,
        {{ verdict_field('rubric', 'score', 'integer') }} as score,
        {{ verdict_field('rubric', 'declined', 'boolean') }} as declined,
        {{ verdict_field('contrastive', 'interpret') }} as interpret,
        {{ verdict_field('contrastive', 'stereotype') }} as stereotype,
        {{ verdict_field('contrastive', 'framing') }} as framing,
        {{ verdict_field('contrastive', 'decline_in_response_a', 'boolean') }} as decline_in_response_a,
        {{ verdict_field('contrastive', 'decline_in_response_b', 'boolean') }} as decline_in_response_b,
        {{ count_note_code('parse_notes', 'span_not_found') }} as n_spans_not_found,
        {{ count_note_code('parse_notes', 'yes_without_spans') }} as n_yes_without_spans,
        {{ count_note_code('parse_notes', 'score_mismatch') }} as n_score_mismatch,
        {{ count_note_code('parse_notes', 'judge_truncated') }} as n_judge_truncated,
        raw_output,
        parsed_json,
        parse_notes,
        error_message,
        source,
        run_id,
        created_at,
        landing_id

    from statused

)

select * from final
