{#
    The version string a scorer writes today, as a SQL literal. The version is
    defined once, in Python (ableaudit.scorers.*.SCORER_VERSION, and for Regard
    the classifier in var('regard_model')); the dbt-duckdb plugin exposes it as
    the UDF ableaudit_scorer_version(), which is called here at run time so the
    compiled SQL holds a plain literal and needs no UDF when it is read.
#}
{% macro current_scorer_version(scorer) -%}
    {%- if not execute -%}
        {{ return("'(not executed)'") }}
    {%- endif -%}
    {%- set query -%}
        select ableaudit_scorer_version('{{ scorer }}', '{{ (var("regard_model") or "") | replace("'", "''") }}')
    {%- endset -%}
    {%- set version = run_query(query).columns[0].values()[0] -%}
    {{ return("'" ~ (version | replace("'", "''")) ~ "'") }}
{%- endmacro %}
