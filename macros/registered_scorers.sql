{#
    The scorers of the registry (ableaudit.scorers.registry, one declaration
    each), read at run time through the plugin's UDF ableaudit_scorer_catalog:
    a list of dicts with name, version, sql_function, model, reads, metric and
    the metric's columns (display_name, direction, scale_min, scale_max,
    truncated_pairs, description). ``model``: only the scorers whose scores
    that model holds (e.g. 'response_scores_text'). Empty while dbt parses.
#}
{% macro registered_scorers(model=none) -%}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set query -%}
        select ableaudit_scorer_catalog('{{ (var("regard_model") or "") | replace("'", "''") }}')
    {%- endset -%}
    {%- set scorers = fromjson(run_query(query).columns[0].values()[0]) -%}
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
