{#
    Regard per distinct response text and classifier, scored once: the texts
    come from texts_to_score like every scorer's, and those whose last attempt
    was 'error' are tried again. A text whose last attempt was 'unavailable' is
    tried again only when the classifier's availability changed: the probe
    (regard_score with batch size 0, run once per build) says whether the
    classifier loads today and if not why; a row with that same reason is left
    as it is, so an unavailable classifier costs no rewrite, and once it loads
    every unavailable text is scored. A text `ableaudit score --scorer regard`
    landed in raw.text_scores for the current classifier is taken from there
    (macro landed_text_scores), not classified again. The regard_score UDF
    (ableaudit.scorers.regard) runs the classifier var('regard_model') (empty:
    $ABLEAUDIT_REGARD_MODEL, else sasha/regardv3), var('scorer_batch_size')
    texts per forward pass, batched by token length.
#}
{{
    config(
        materialized='incremental',
        unique_key=['text_hash', 'scorer_version'],
        on_schema_change='fail',
    )
}}
{%- set regard_model = (var('regard_model') or '') | replace("'", "''") -%}
{%- set regard_columns = ['regard', 'p_positive', 'p_negative', 'n_tokens', 'max_tokens', 'reason'] -%}

with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

not_final as (

    {{ texts_to_score('generations', 'regard', retry_statuses=['unavailable', 'error']) }}

),
{%- if is_incremental() %}

availability as (

    select regard_score('', '{{ regard_model }}', 0) as probe

),
{%- endif %}

pending as (

    select not_final.*
    from not_final
    {%- if is_incremental() %}
    cross join availability
    left join (
        select text_hash, reason from {{ this }}
        where
            scorer_version = {{ current_scorer_version('regard') }}
            and status = 'unavailable'
    ) as unavailable
        on not_final.text_hash = unavailable.text_hash
    where
        unavailable.text_hash is null
        or availability.probe.status != 'unavailable'
        or unavailable.reason is distinct from availability.probe.reason
    {%- endif %}

),

landed as (

    {{ landed_text_scores('regard', regard_columns) }}

),

taken as (

    select landed.*

    from pending
    inner join landed
        on pending.text_hash = landed.text_hash

),

classified as (

    select
        pending.text_hash,
        regard_score(
            pending.response_text,
            '{{ regard_model }}',
            {{ var('scorer_batch_size') | int }}
        ) as score

    from pending
    left join landed
        on pending.text_hash = landed.text_hash
    where landed.text_hash is null

),

scored as (

    select
        classified.text_hash,
        {{ current_scorer_version('regard') }} as scorer_version,
        classified.score.regard,
        classified.score.p_positive,
        classified.score.p_negative,
        classified.score.n_tokens,
        classified.score.max_tokens,
        classified.score.reason,
        classified.score.status,
        current_timestamp as scored_at

    from classified

),

final as (

    select * from taken

    union all by name

    select * from scored

)

select
    text_hash,
    scorer_version,
    regard,
    p_positive,
    p_negative,
    n_tokens,
    max_tokens,
    status,
    reason,
    scored_at
from final
