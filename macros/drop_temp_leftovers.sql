{#
    The end of every dbt invocation (on-run-end), before the checkpoint: an incremental
    Python model (detector_verdicts) stages its new rows in a real table named
    `<model>__dbt_tmp<timestamp>`, which dbt-duckdb's incremental materialization creates
    as a temporary relation and so never drops. One was left in the warehouse, and
    published, by every incremental build. This drops every table named like dbt's
    temporary and backup relations in the target database.
#}
{% macro drop_temp_leftovers() -%}
    {%- if execute and target.type == 'duckdb' -%}
        {%- set found = run_query(
            "select schema_name, table_name from duckdb_tables() "
            ~ "where database_name = current_database() and not temporary "
            ~ "and (contains(table_name, '__dbt_tmp') or contains(table_name, '__dbt_backup'))"
        ) -%}
        {%- for row in found.rows -%}
            drop table if exists {{ adapter.quote(row[0]) }}.{{ adapter.quote(row[1]) }};
        {% endfor -%}
    {%- endif -%}
    select 1
{%- endmacro %}
