{#
    The distinct response texts a scorer has not scored yet under its current
    version: every text on a full build, only the new ones on an incremental
    build, and again those whose last attempt ended in one of retry_statuses
    (a status that is no final result, e.g. Regard's 'unavailable'). The one
    rule for what a scorer scores: every scorer model (response_scores_*)
    selects its texts through it. Columns: text_hash, response_text.
#}
{% macro texts_to_score(generations, scorer, retry_statuses=[]) -%}
    select
        {{ generations }}.text_hash,
        min({{ generations }}.response_text) as response_text
    from {{ generations }}
    {%- if is_incremental() %}
    left join (
        select text_hash from {{ this }}
        where
            scorer_version = {{ current_scorer_version(scorer) }}
            {%- if retry_statuses %}
            and status not in ({% for status in retry_statuses %}'{{ status }}'{{ ', ' if not loop.last }}{% endfor %})
            {%- endif %}
    ) as already_scored
        on {{ generations }}.text_hash = already_scored.text_hash
    {%- endif %}
    where {{ generations }}.response_text is not null
    {%- if is_incremental() %}
        and already_scored.text_hash is null
    {%- endif %}
    group by {{ generations }}.text_hash
{%- endmacro %}

{#
    The body of a per-text scorer model (response_scores_vader,
    response_scores_verbosity, response_refusals): the texts without a row for
    the scorer's current version, each scored by the given SQL expressions.
    Columns: text_hash, scorer_version, <expressions>, status, scored_at. The
    model keeps its own config (incremental, unique on text_hash and
    scorer_version).
#}
{% macro score_pending_texts(scorer, expressions) -%}
with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

pending as (

    {{ texts_to_score('generations', scorer) }}

),

scored as (

    select
        text_hash,
        {{ current_scorer_version(scorer) }} as scorer_version,
        {%- for expression in expressions %}
        {{ expression }},
        {%- endfor %}
        'ok' as status,
        current_timestamp as scored_at

    from pending

)

select * from scored
{%- endmacro %}
