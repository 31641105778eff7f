{#
    What a scorer does with a disability word alone, probe by probe: one row per
    scorer that has a masked variant (vader, regard; from the registry, a masked
    scorer's `masks`), disability category, term of its mask set
    (int_mask_sets: its query phrase, terms and plurals) and carrier sentence
    (seed scorer_bias_carriers). Each carrier is scored with the term in its
    placeholder (disability_score) and with the term masked (neutral_score: the
    same sentence with the masked scorers' neutral token, ableaudit_mask_text),
    as the two answers of a pair whose only difference is the term; degraded
    applies the metric's own rule (macro is_degraded, var degradation_rule at
    var degradation_threshold). term_score is the term scored alone, token_score
    the token alone.

    Scored through the masked scorer's function with no terms, which is the
    scorer's own score of the text (regard: the classifier var('regard_model');
    unavailable, every probe says so in status and reason, its scores null).
#}
{{ config(materialized='table') }}
{#- the masked variants of a score (a masked parity, flagged by a rule of its own, is no such variant) -#}
{%- set masked = registered_scorers('response_scores_masked') | rejectattr('flag_rule') | list %}
{%- set classifier = (var('regard_model') or '') | replace("'", "''") %}

with

mask_sets as (

    select * from {{ ref('int_mask_sets') }}

),

carriers as (

    select * from {{ ref('scorer_bias_carriers') }}

),

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

terms as (

    select
        disability_id,
        unnest(terms) as term

    from mask_sets

),

probes as (

    select
        terms.disability_id,
        terms.term,
        carriers.carrier_id,
        replace(carriers.template, '{phrase}', terms.term) as text_with_term,
        ableaudit_mask_text(replace(carriers.template, '{phrase}', terms.term), [terms.term]) as text_with_token,
        ableaudit_mask_text(terms.term, [terms.term]) as token

    from terms
    cross join carriers

),

texts as (

    select text_with_term as text from probes
    union
    select text_with_token as text from probes
    union
    select term as text from probes
    union
    select token as text from probes

),

scored as (

    {%- for s in masked %}
    select
        '{{ s.masks }}' as scorer,
        '{{ s.name }}' as masked_scorer,
        {{ current_scorer_version(s.masks) }} as scorer_version,
        texts.text,
        {{ s.sql_function }}(
            texts.text, cast([] as varchar[]), '{{ classifier }}', {{ var('scorer_batch_size') | int }}
        ) as result

    from texts
    {{ 'union all' if not loop.last }}
    {%- else %}
    -- no masked scorer (and while dbt parses): the columns, no rows
    select
        cast(null as varchar) as scorer,
        cast(null as varchar) as masked_scorer,
        cast(null as varchar) as scorer_version,
        cast(null as varchar) as text,
        cast(null as struct(score double, status varchar, reason varchar)) as result
    where false
    {%- endfor %}

),

text_scores as (

    select
        scorer,
        masked_scorer,
        scorer_version,
        text,
        result.score as score,
        result.status as status,
        result.reason as reason

    from scored

),

probe_scores as (

    select
        with_term.scorer,
        with_term.masked_scorer,
        with_term.scorer_version,
        metrics.direction,
        probes.disability_id,
        probes.term,
        probes.carrier_id,
        probes.text_with_term,
        probes.text_with_token,
        alone.score as term_score,
        token_alone.score as token_score,
        with_token.score as neutral_score,
        with_term.score as disability_score,
        -- the first of the four scores that is not a result says why
        case
            when alone.status not in ('ok', 'truncated') then alone.status
            when token_alone.status not in ('ok', 'truncated') then token_alone.status
            when with_token.status not in ('ok', 'truncated') then with_token.status
            when with_term.status not in ('ok', 'truncated') then with_term.status
            else 'ok'
        end as status,
        coalesce(alone.reason, token_alone.reason, with_token.reason, with_term.reason) as reason,
        cast({{ var('degradation_threshold') }} as double) as threshold,
        '{{ degradation_rule() }}' as degradation_rule

    from probes
    inner join text_scores as with_term
        on probes.text_with_term = with_term.text
    inner join text_scores as with_token
        on probes.text_with_token = with_token.text
        and with_term.scorer = with_token.scorer
    inner join text_scores as alone
        on probes.term = alone.text
        and with_term.scorer = alone.scorer
    inner join text_scores as token_alone
        on probes.token = token_alone.text
        and with_term.scorer = token_alone.scorer
    inner join metrics
        on with_term.scorer = metrics.metric

),

final as (

    select
        *,
        disability_score - neutral_score as shift,
        {{ is_degraded('neutral_score', 'disability_score', 'direction', 'threshold') }} as degraded

    from probe_scores

)

select * from final
