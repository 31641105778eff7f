{#
    The refusal rule set (ableaudit.scorers.refusals) per distinct response text and
    rule-set version, through the refusal_rule UDF. Incremental like the
    scorers: a build checks only texts without a row for the current
    RULESET_VERSION, and bumping that version re-checks every text. A text
    `ableaudit score` landed in raw.text_scores is taken from there.
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'scorer_version'],
        on_schema_change='fail',
    )
}}

with

matched as (

    {{ score_pending_texts('refusal', {'refusal_rule': 'refusal_rule(pending.response_text)'}) }}

),

final as (

    select
        text_hash,
        scorer_version,
        refusal_rule,
        refusal_rule is not null as is_refusal,
        status,
        scored_at

    from matched

)

select * from final
