{#
    The end of every dbt invocation (on-run-end): DuckDB reuses the blocks that
    replaced tables freed only after a checkpoint, so without one the warehouse
    file grew by the size of the table marts on every build (docs/incremental.md).
    Other adapters need nothing.
#}
{% macro checkpoint_warehouse() -%}
    {{ return(adapter.dispatch('checkpoint_warehouse', 'ableaudit')()) }}
{%- endmacro %}

{% macro default__checkpoint_warehouse() -%}
    select 1
{%- endmacro %}

{% macro duckdb__checkpoint_warehouse() -%}
    {%- if execute and target.path != ':memory:' -%}
        checkpoint
    {%- else -%}
        select 1
    {%- endif -%}
{%- endmacro %}
