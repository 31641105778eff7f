{#
    The scores of every registered scorer without a model of its own
    (ableaudit.scorers.registry: its model is response_scores_text), long: one
    row per distinct response text, scorer and scorer version, the value in
    score. Derived from the registry (macro registered_scorers): a scorer
    registered there is scored here with no SQL of its own. Incremental like
    response_scores_vader, and likewise taken from raw.text_scores where
    `ableaudit score` landed it.
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'scorer', 'scorer_version'],
        on_schema_change='fail',
    )
}}

{{ score_registered_texts('response_scores_text') }}
