{#
    The built-in judge dimension sets (ableaudit.judges.dimensions.catalog), read at run
    time through the plugin's UDF ableaudit_judge_dimension_catalog: a list of dicts with
    prompt_version, name, is_default and definition (JSON). Empty while dbt parses.
#}
{% macro builtin_dimension_sets() -%}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set query -%}
        select ableaudit_judge_dimension_catalog()
    {%- endset -%}
    {{ return(fromjson(run_query(query).columns[0].values()[0])) }}
{%- endmacro %}
