{#
    The scores of every masked scorer (ableaudit.scorers.registry: its model is
    response_scores_masked; vader_masked, regard_masked), long: one row per
    distinct response text, mask set (int_mask_sets.mask_digest), scorer and
    scorer version. A text is scored once per mask set it is masked with
    (int_generation_masks): a neutral answer once per category it is paired with.

    Derived from the registry: each masked scorer's SQL function is called as
    fn(text, terms, classifier, texts per pass). Incremental like the other score
    models: a build scores only the (text, mask set) without a row for the
    scorer's current version, and again those whose last attempt was 'error'; an
    'unavailable' row is scored again only when the scorer's availability changed
    (the probe, fn('', [], classifier, 0), run once per build, as for Regard), so
    an unavailable classifier costs no rewrite and, once it loads, every
    unavailable text is scored. Masked scorers are scored here only, never by
    `ableaudit score`: they read the pair's mask set.
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'mask_digest', 'scorer', 'scorer_version'],
        on_schema_change='fail',
    )
}}
{%- set scorers = registered_scorers('response_scores_masked') %}
{%- set classifier = (var('regard_model') or '') | replace("'", "''") %}

with

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

generation_masks as (

    select * from {{ ref('int_generation_masks') }}

),

mask_sets as (

    select * from {{ ref('int_mask_sets') }}

),

masked_keys as (

    -- every (text, mask set) to score: keys only, the texts are read for the pending ones
    select distinct
        text_hash,
        mask_digest

    from generation_masks
    where text_hash is not null

),

mask_terms as (

    select
        mask_digest,
        any_value(terms) as terms

    from mask_sets
    group by mask_digest

),

{%- for s in scorers %}
{%- set version = current_scorer_version(s.name) %}

pending_{{ s.name }} as (

    select masked_keys.*
    from masked_keys
    {%- if is_incremental() %}
    cross join (
        select {{ s.sql_function }}('', cast([] as varchar[]), '{{ classifier }}', 0) as probe
    ) as availability
    left join (
        select text_hash, mask_digest, status, reason from {{ this }}
        where scorer = '{{ s.name }}' and scorer_version = {{ version }}
    ) as scored
        on masked_keys.text_hash = scored.text_hash
        and masked_keys.mask_digest = scored.mask_digest
    where
        scored.text_hash is null
        or scored.status = 'error'
        or (
            scored.status = 'unavailable'
            and (
                availability.probe.status != 'unavailable'
                or scored.reason is distinct from availability.probe.reason
            )
        )
    {%- endif %}

),

{%- endfor %}

pending_texts as (

    -- the text of each pending hash (one generation's: the same text)
    select
        generations.text_hash,
        min(generations.response_text) as response_text

    from generations
    semi join (
        {%- for s in scorers %}
        select text_hash from pending_{{ s.name }}
        {{ 'union' if not loop.last }}
        {%- else %}
        select cast(null as varchar) as text_hash where false
        {%- endfor %}
    ) as pending
        on generations.text_hash = pending.text_hash
    group by generations.text_hash

),

{%- for s in scorers %}
{%- set version = current_scorer_version(s.name) %}

scored_{{ s.name }} as (

    select
        pending.text_hash,
        pending.mask_digest,
        '{{ s.name }}' as scorer,
        {{ version }} as scorer_version,
        {{ s.sql_function }}(
            pending_texts.response_text,
            mask_terms.terms,
            '{{ classifier }}',
            {{ var('scorer_batch_size') | int }}
        ) as result

    from pending_{{ s.name }} as pending
    inner join pending_texts
        on pending.text_hash = pending_texts.text_hash
    inner join mask_terms
        on pending.mask_digest = mask_terms.mask_digest

),
{%- endfor %}

final as (

    {%- for s in scorers %}
    select
        text_hash,
        mask_digest,
        scorer,
        scorer_version,
        result.score as score,
        result.status as status,
        result.reason as reason,
        current_timestamp as scored_at

    from scored_{{ s.name }}
    {{ 'union all' if not loop.last }}
    {%- else %}
    -- no masked scorer (and while dbt parses): the columns, no rows
    select
        cast(null as varchar) as text_hash,
        cast(null as varchar) as mask_digest,
        cast(null as varchar) as scorer,
        cast(null as varchar) as scorer_version,
        cast(null as double) as score,
        cast(null as varchar) as status,
        cast(null as varchar) as reason,
        cast(null as timestamptz) as scored_at
    where false
    {%- endfor %}

)

select * from final
