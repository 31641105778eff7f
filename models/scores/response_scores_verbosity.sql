{#
    Word count per distinct response text and scorer version, incremental like
    response_scores_vader (cheap, but the same pattern keeps every scorer alike).
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'scorer_version'],
        on_schema_change='fail',
    )
}}

{{ score_pending_texts('verbosity', {'word_count': 'word_count(pending.response_text)'}) }}
