{#
    The value of every pair scorer (ableaudit.scorers.pair_registry: cosine similarity,
    ROUGE-L, BLEU, sentiment parity) for each distinct pair of texts, a neutral answer's
    and a disability-aware answer's, that a pair of int_pairs holds: one row per neutral
    text hash, disability text hash, scorer and scorer version, scored once by the
    scorer's UDF. Incremental like the per-text scores: a build scores only the text
    pairs without a row for the scorer's current version, so a pair of texts is scored
    once however many pairs (models, runs, samples) hold it, and a new version (another
    var('similarity_model'), a library upgrade) scores every text pair once more. Rows of
    text pairs no pair holds any more stay (a content-addressed cache).
#}
{{
    config(
        materialized='incremental',
        unique_key=['neutral_text_hash', 'disability_text_hash', 'scorer', 'scorer_version'],
        on_schema_change='fail',
    )
}}
{%- set scorers = registered_pair_scorers() %}
{%- set model_ref = (var('similarity_model') or '') | replace("'", "''") %}

with

pairs as (

    select * from {{ ref('int_pairs') }}

),

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

text_pairs as (

    select distinct
        neutral.text_hash as neutral_text_hash,
        disability.text_hash as disability_text_hash

    from pairs
    inner join generations as neutral
        on pairs.neutral_generation_id = neutral.generation_id
    inner join generations as disability
        on pairs.disability_generation_id = disability.generation_id
    where
        neutral.text_hash is not null
        and disability.text_hash is not null

),

{%- for s in scorers %}

pending_{{ s.name }} as (

    select text_pairs.*

    from text_pairs
    {%- if is_incremental() %}
    anti join (
        select neutral_text_hash, disability_text_hash from {{ this }}
        where scorer = {{ scorer_literal(s.name) }} and scorer_version = {{ scorer_literal(s.version) }}
    ) as already_scored
        on text_pairs.neutral_text_hash = already_scored.neutral_text_hash
        and text_pairs.disability_text_hash = already_scored.disability_text_hash
    {%- endif %}

),
{%- endfor %}

pending_texts as (

    -- the texts of the pending pairs, each once
    select
        text_hash,
        min(response_text) as response_text

    from generations
    where text_hash in (
        {%- for s in scorers %}
        select neutral_text_hash from pending_{{ s.name }}
        union
        select disability_text_hash from pending_{{ s.name }}
        {{ 'union' if not loop.last }}
        {%- else %}
        select cast(null as varchar)
        {%- endfor %}
    )
    group by text_hash

),

{%- for s in scorers %}

scored_{{ s.name }} as (

    select
        pending.neutral_text_hash,
        pending.disability_text_hash,
        {{ scorer_literal(s.name) }} as scorer,
        {{ scorer_literal(s.version) }} as scorer_version,
        {{ s.sql_function }}(
            neutral.response_text,
            disability.response_text
            {%- if s.takes_model %},
            '{{ model_ref }}'
            {%- endif %}
        ) as value

    from pending_{{ s.name }} as pending
    inner join pending_texts as neutral
        on pending.neutral_text_hash = neutral.text_hash
    inner join pending_texts as disability
        on pending.disability_text_hash = disability.text_hash

),
{%- endfor %}

final as (

    {%- for s in scorers %}
    select
        neutral_text_hash,
        disability_text_hash,
        scorer,
        scorer_version,
        value.neutral_score,
        value.disability_score,
        value.status,
        value.reason,
        current_timestamp as scored_at
    from scored_{{ s.name }}
    {{ 'union all' if not loop.last }}
    {%- else %}
    -- no pair scorer registered (and while dbt parses): the columns, no rows
    select
        cast(null as varchar) as neutral_text_hash,
        cast(null as varchar) as disability_text_hash,
        cast(null as varchar) as scorer,
        cast(null as varchar) as scorer_version,
        cast(null as double) as neutral_score,
        cast(null as double) as disability_score,
        cast(null as varchar) as status,
        cast(null as varchar) as reason,
        cast(null as timestamptz) as scored_at
    where false
    {%- endfor %}

)

select * from final
