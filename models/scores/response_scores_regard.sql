{#
    Regard per distinct response text and classifier, scored once: the texts
    come from texts_to_score like every scorer's, and those whose last attempt
    was 'unavailable' or 'error' (no result) are tried again. The regard_score
    UDF (ableaudit.scorers.regard) runs the classifier var('regard_model')
    (empty: $ABLEAUDIT_REGARD_MODEL, else sasha/regardv3), var('scorer_batch_size')
    texts per forward pass.
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'scorer_version'],
        on_schema_change='fail',
    )
}}
{%- set regard_model = (var('regard_model') or '') | replace("'", "''") -%}

with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

pending as (

    {{ texts_to_score('generations', 'regard', retry_statuses=['unavailable', 'error']) }}

),

classified as (

    select
        text_hash,
        regard_score(
            response_text,
            '{{ regard_model }}',
            {{ var('scorer_batch_size') | int }}
        ) as score

    from pending

),

final as (

    select
        classified.text_hash,
        {{ current_scorer_version('regard') }} as scorer_version,
        classified.score.regard,
        classified.score.p_positive,
        classified.score.p_negative,
        classified.score.n_tokens,
        classified.score.max_tokens,
        classified.score.status,
        classified.score.reason,
        current_timestamp as scored_at

    from classified

)

select * from final
