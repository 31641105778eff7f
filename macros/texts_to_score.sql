{#
    The distinct response texts a scorer has not scored yet under its current
    version: every text on a full build, only the new ones on an incremental
    build. The SQL twin of ableaudit.scorers.pending.pending_texts (used by the
    Python scorer models). Columns: text_hash, response_text.
#}
{% macro texts_to_score(generations, scorer) -%}
    select
        {{ generations }}.text_hash,
        min({{ generations }}.response_text) as response_text
    from {{ generations }}
    {%- if is_incremental() %}
    left join (
        select text_hash from {{ this }}
        where scorer_version = {{ current_scorer_version(scorer) }}
    ) as already_scored
        on {{ generations }}.text_hash = already_scored.text_hash
    {%- endif %}
    where {{ generations }}.response_text is not null
    {%- if is_incremental() %}
        and already_scored.text_hash is null
    {%- endif %}
    group by {{ generations }}.text_hash
{%- endmacro %}
