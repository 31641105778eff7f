{#
    The scorers of the registry (ableaudit.scorers.registry, one declaration
    each), read at run time through the plugin's UDF ableaudit_scorer_catalog:
    a list of dicts with name, version, sql_function, model, reads, masks,
    flag_rule, threshold, metric and the metric's columns (display_name,
    direction, scale_min, scale_max, truncated_pairs, description). A scorer
    with a flag rule of its own takes its threshold from
    var('pair_metric_thresholds') when the var names it (macro
    registered_pair_scorers checks the var). ``model``: only the scorers whose
    scores that model holds (e.g. 'response_scores_text'). Empty while dbt
    parses.
#}
{% macro registered_scorers(model=none) -%}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set query -%}
        select ableaudit_scorer_catalog('{{ (var("regard_model") or "") | replace("'", "''") }}')
    {%- endset -%}
    {%- set scorers = fromjson(run_query(query).columns[0].values()[0]) -%}
    {%- set thresholds = var('pair_metric_thresholds') or {} -%}
    {%- for s in scorers if s.flag_rule and thresholds is mapping and s.name in thresholds -%}
        {%- do s.update({'threshold': thresholds[s.name]}) -%}
    {%- endfor -%}
    {%- if model is not none -%}
        {%- set scorers = scorers | selectattr('model', 'equalto', model) | list -%}
    {%- endif -%}
    {{ return(scorers) }}
{%- endmacro %}

{# A value of the catalog as a SQL literal of ``type`` (null for None). #}
{% macro scorer_literal(value, type='varchar') -%}
    {%- if value is none -%}
        cast(null as {{ type }})
    {%- else -%}
        cast('{{ value | string | replace("'", "''") }}' as {{ type }})
    {%- endif -%}
{%- endmacro %}

{#
    Literal rows, one per entry of ``entries`` (a registry's catalog), one column per
    [alias, key, type] of ``columns``: the entry's value at ``key`` as a literal of
    ``type`` (scorer_literal). With no entry (and while dbt parses) the same columns, no rows.
#}
{% macro literal_rows(entries, columns) -%}
    {%- for e in entries %}
    select
        {%- for alias, key, sql_type in columns %}
        {{ scorer_literal(e[key], sql_type) }} as {{ alias }}{{ ',' if not loop.last }}
        {%- endfor %}
    {{ 'union all' if not loop.last }}
    {%- else %}
    select
        {%- for alias, key, sql_type in columns %}
        cast(null as {{ sql_type }}) as {{ alias }}{{ ',' if not loop.last }}
        {%- endfor %}
    where false
    {%- endfor %}
{%- endmacro %}

{#
    The body of response_scores_text: every registered scorer whose model is
    ``model``, each scored as score_pending_texts scores a scorer of its own
    model (its texts still to score, a landed row taken), long: text_hash,
    scorer, scorer_version, score, status, scored_at.
#}
{% macro score_registered_texts(model) -%}
{%- set scorers = registered_scorers(model) %}
with

{%- for s in scorers %}

scores_{{ s.name }} as (

    {%- set value = 'cast(' ~ s.sql_function ~ '(pending.response_text) as double)' %}
    {{ score_pending_texts(s.name, {'score': value}, long=true) }}

),
{%- endfor %}

final as (

    {%- for s in scorers %}
    select
        text_hash,
        scorer,
        scorer_version,
        score,
        status,
        scored_at
    from scores_{{ s.name }}
    {{ 'union all' if not loop.last }}
    {%- else %}
    -- no scorer here yet (and while dbt parses): the columns, no rows
    select
        text_hash,
        cast(null as varchar) as scorer,
        cast(null as varchar) as scorer_version,
        cast(null as double) as score,
        cast(null as varchar) as status,
        cast(null as timestamptz) as scored_at
    from {{ ref('stg_raw__generations') }}
    where false
    {%- endfor %}

)

select * from final
{%- endmacro %}
