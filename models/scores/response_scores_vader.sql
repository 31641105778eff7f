{#
    VADER compound per distinct response text and scorer version. Incremental:
    a build scores only texts that have no row yet for the current version, so
    a rebuild recomputes nothing unchanged. A text `ableaudit score` landed in
    raw.text_scores is taken from there, not scored again (macro
    score_pending_texts).
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'scorer_version'],
        on_schema_change='fail',
    )
}}

{{ score_pending_texts('vader', {'vader_compound': 'vader_compound(pending.response_text)'}) }}
