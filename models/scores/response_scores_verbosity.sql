{#
    Word count per distinct response text and scorer version, incremental like
    response_scores_vader (cheap, but the same pattern keeps every scorer alike),
    and likewise taken from raw.text_scores where `ableaudit score` landed it.
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'scorer_version'],
        on_schema_change='fail',
    )
}}

{{ score_pending_texts('verbosity', {'word_count': 'word_count(pending.response_text)'}) }}
