{#
    The assistive technologies each answered generation mentions, with the fit
    of each for the generation's disability: 'serves' or 'partial' as
    seeds/assistive_technology_disabilities.csv says, 'mismatch' where the
    technology is not listed for that disability (a screen reader in a hearing
    answer), 'neutral_query' for a neutral prompt (a baseline: no disability to
    fit). One row per 'ok' generation and technology mentioned, under the
    current matcher version; an 'ok' generation that mentions none has one row
    with technology_id null and match_status 'no_mention', one whose text has
    not been matched yet 'not_matched', so every answered generation is here.
#}
{#- its rows of a model come from that model's rows of each input with a model_id (macro record_group_local_view) -#}
{{ config(post_hook="{{ record_group_local_view() }}") }}
{%- set matcher = assistive_tech_matcher() %}

with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

response_assistive_tech as (

    select * from {{ ref('response_assistive_tech') }}
    where scorer_version = {{ matcher.version }}

),

technologies as (

    select * from {{ ref('assistive_technologies') }}

),

technology_disabilities as (

    select * from {{ ref('assistive_technology_disabilities') }}

),

answered as (

    select * from generations
    where status = 'ok'

),

matched as (

    select
        answered.generation_id,
        answered.task,
        answered.model_id,
        answered.arm,
        answered.query_set,
        answered.query_id,
        answered.domain,
        answered.condition,
        answered.disability_id,
        answered.text_hash,
        response_assistive_tech.technology_id,
        response_assistive_tech.n_occurrences,
        response_assistive_tech.n_negated,
        response_assistive_tech.is_recommended,
        response_assistive_tech.matched_phrases,
        case
            when response_assistive_tech.text_hash is null then 'not_matched'
            when response_assistive_tech.technology_id is null then 'no_mention'
            else 'mentioned'
        end as match_status

    from answered
    left join response_assistive_tech
        on answered.text_hash = response_assistive_tech.text_hash

),

final as (

    select
        matched.generation_id,
        matched.task,
        matched.model_id,
        matched.arm,
        matched.query_set,
        matched.query_id,
        matched.domain,
        matched.condition,
        matched.disability_id,
        matched.text_hash,
        matched.match_status,
        matched.technology_id,
        technologies.category,
        coalesce(matched.n_occurrences, 0) as n_occurrences,
        coalesce(matched.n_negated, 0) as n_negated,
        coalesce(matched.is_recommended, false) as is_recommended,
        matched.matched_phrases,
        case
            when matched.technology_id is null then null
            when matched.condition = 'neutral' then 'neutral_query'
            when technology_disabilities.fit is null then 'mismatch'
            else technology_disabilities.fit
        end as fit

    from matched
    left join technologies
        on matched.technology_id = technologies.technology_id
    left join technology_disabilities
        on matched.technology_id = technology_disabilities.technology_id
        and matched.disability_id = technology_disabilities.disability_id

)

select * from final
