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
{%- set scorers = registered_scorers('response_scores_text') %}
{%- for s in scorers %}
select * from (
    {{ score_pending_texts(s.name, {'score': 'cast(' ~ s.sql_function ~ '(pending.response_text) as double)'}, long=true) }}
)
{{ 'union all' if not loop.last }}
{%- else %}
select
    cast(null as varchar) as text_hash,
    cast(null as varchar) as scorer,
    cast(null as varchar) as scorer_version,
    cast(null as double) as score,
    cast(null as varchar) as status,
    cast(null as timestamptz) as scored_at
from {{ ref('stg_raw__generations') }}
where false
{%- endfor %}
