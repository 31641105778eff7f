{#
    The distinct response texts a scorer has not scored yet under its current
    version: every text on a full build, only the new ones on an incremental
    build, and again those whose last attempt ended in one of retry_statuses
    (a status that is no final result, e.g. Regard's 'unavailable'). The one
    rule for what a scorer scores: every scorer model (response_scores_*)
    selects its texts through it. ``long``: the model holds several scorers'
    rows (response_scores_text), told apart by its column scorer. Columns:
    text_hash, response_text.
#}
{% macro texts_to_score(generations, scorer, retry_statuses=[], long=false) -%}
    select
        {{ generations }}.text_hash,
        min({{ generations }}.response_text) as response_text
    from {{ generations }}
    {%- if is_incremental() %}
    left join (
        select text_hash from {{ this }}
        where
            scorer_version = {{ current_scorer_version(scorer) }}
            {%- if long %}
            and scorer = '{{ scorer }}'
            {%- endif %}
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
    The scores of a scorer's current version that `ableaudit score` (the
    scoring flow, ableaudit.scoring) landed in raw.text_scores, in the columns
    of its score model. Columns: text_hash, (``long``: scorer,) scorer_version,
    <columns>, status, scored_at (as timestamptz, the type of the model's own
    scored_at).
#}
{% macro landed_text_scores(scorer, columns, long=false) -%}
    select
        text_hash,
        {%- if long %}
        scorer,
        {%- endif %}
        scorer_version,
        {%- for column in columns %}
        {{ column }},
        {%- endfor %}
        status,
        cast(scored_at as timestamptz) as scored_at
    from {{ source('raw', 'text_scores') }}
    where
        scorer = '{{ scorer }}'
        and scorer_version = {{ current_scorer_version(scorer) }}
{%- endmacro %}

{#
    The body of a per-text scorer model (response_scores_vader,
    response_scores_verbosity, response_refusals): the texts without a row for
    the scorer's current version, each taken from raw.text_scores when the
    scoring flow landed it (the same value, computed by the same function) and
    otherwise scored here by its SQL expression. ``columns`` maps each score
    column to the expression that computes it. Columns: text_hash,
    scorer_version, <columns>, status, scored_at. The model keeps its own config
    (incremental, unique on text_hash and scorer_version). ``long``: one scorer
    of response_scores_text, with the column scorer after text_hash.
#}
{% macro score_pending_texts(scorer, columns, long=false) -%}
with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

pending as (

    {{ texts_to_score('generations', scorer, long=long) }}

),

landed as (

    {{ landed_text_scores(scorer, columns.keys() | list, long=long) }}

),

taken as (

    select landed.*

    from pending
    inner join landed
        on pending.text_hash = landed.text_hash

),

scored as (

    select
        pending.text_hash,
        {%- if long %}
        '{{ scorer }}' as scorer,
        {%- endif %}
        {{ current_scorer_version(scorer) }} as scorer_version,
        {%- for column, expression in columns.items() %}
        {{ expression }} as {{ column }},
        {%- endfor %}
        'ok' as status,
        current_timestamp as scored_at

    from pending
    left join landed
        on pending.text_hash = landed.text_hash
    where landed.text_hash is null

)

select * from taken

union all

select * from scored
{%- endmacro %}
