{#
    Assistive technologies mentioned in each distinct response text, matched in
    SQL against the synonyms of seeds/assistive_technologies.csv (the rules:
    macros/assistive_tech_matcher.sql and the header of seeds/assistive_tech.yml).
    Incremental like the scorers: a build matches only texts without a row for
    the current matcher version, which hashes the synonyms, so editing a
    synonym re-matches every text.

    Two constant regexes run once per text: every phrase (synonyms and
    exclusions in one alternation), and every phrase right after a negation
    cue. Each matched string is mapped back to its phrase by a key (lowercase,
    no spaces or hyphens, plural 's'/'es' allowed); exclusions map to no
    technology and are dropped. A text recommends a technology when at least
    one of its occurrences is not negated.

    One row per (text_hash, technology_id) mentioned; a text that mentions no
    technology gets one row with technology_id null, so it is not matched again.
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
    )
}}

{%- set matcher = assistive_tech_matcher() %}

with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

technologies as (

    select * from {{ ref('assistive_technologies') }}

),

{%- if is_incremental() %}

already_matched as (

    select distinct text_hash from {{ this }}
    where scorer_version = {{ matcher.version }}

),
{%- endif %}

pending as (

    select
        generations.text_hash,
        min(generations.response_text) as response_text

    from generations
    {%- if is_incremental() %}
    left join already_matched
        on generations.text_hash = already_matched.text_hash
    {%- endif %}
    where generations.response_text is not null
    {%- if is_incremental() %}
        and already_matched.text_hash is null
    {%- endif %}
    group by generations.text_hash

),

phrases as (

    select
        technology_id,
        trim(unnest(string_split(synonyms, '|'))) as phrase

    from technologies

    union all

    -- an exclusion names no technology: its occurrences are dropped
    select
        cast(null as varchar) as technology_id,
        trim(unnest(string_split(exclusions, '|'))) as phrase

    from technologies
    where exclusions is not null

),

phrase_keys as (

    select
        technology_id,
        lower(replace(replace(phrase, '-', ''), ' ', '')) as phrase_key

    from phrases
    where phrase <> ''

),

extracted as (

    select
        text_hash,
        regexp_extract_all(response_text, {{ matcher.pattern }}) as matches,
        regexp_extract_all(response_text, {{ matcher.negated_pattern }}, 1) as negated_matches

    from pending

),

matched_strings as (

    select
        text_hash,
        unnest(matches) as matched_text,
        false as is_negated

    from extracted

    union all

    select
        text_hash,
        unnest(negated_matches) as matched_text,
        true as is_negated

    from extracted

),

keyed as (

    select
        text_hash,
        matched_text,
        is_negated,
        lower(regexp_replace(matched_text, '[\s-]+', '', 'g')) as match_key

    from matched_strings

),

resolved as (

    -- a phrase key, or the key of its plural
    select
        keyed.text_hash,
        keyed.matched_text,
        keyed.is_negated,
        phrase_keys.technology_id

    from keyed
    inner join phrase_keys
        on keyed.match_key in (
            phrase_keys.phrase_key,
            phrase_keys.phrase_key || 's',
            phrase_keys.phrase_key || 'es'
        )
    where phrase_keys.technology_id is not null

),

mentions as (

    select
        text_hash,
        technology_id,
        count(case when not is_negated then 1 end) as n_occurrences,
        count(case when is_negated then 1 end) as n_negated,
        list_sort(list_distinct(list(lower(matched_text)) filter (where not is_negated))) as matched_phrases

    from resolved
    group by text_hash, technology_id
    having count(case when not is_negated then 1 end) > 0

),

texts_without_mentions as (

    select
        pending.text_hash,
        cast(null as varchar) as technology_id,
        0 as n_occurrences,
        0 as n_negated,
        cast([] as varchar[]) as matched_phrases

    from pending
    left join mentions
        on pending.text_hash = mentions.text_hash
    where mentions.text_hash is null

),

all_rows as (

    select * from mentions

    union all

    select * from texts_without_mentions

),

final as (

    select
        text_hash,
        {{ matcher.version }} as scorer_version,
        technology_id,
        cast(n_occurrences as integer) as n_occurrences,
        -- a negated mention also matched the plain pattern: never more than the occurrences
        cast(least(n_negated, n_occurrences) as integer) as n_negated,
        n_occurrences > n_negated as is_recommended,
        matched_phrases,
        current_timestamp as scored_at

    from all_rows

)

select * from final
