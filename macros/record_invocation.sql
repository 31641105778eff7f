{#
    The last dbt command that ran on this warehouse (dbt_state.last_invocation:
    its invocation id, command and end), written by every run, build, seed or
    test (on-run-end). `ableaudit build` skips a build only when the warehouse
    was last written by the build it stamped: a `dbt build` or `dbt run` started
    by hand in between (other vars, a --select) makes the next one build
    (ableaudit.warehouse.build_stamp, docs/incremental.md).
#}
{% macro record_invocation() -%}
    {%- if execute -%}
        create schema if not exists dbt_state;
        create or replace table dbt_state.last_invocation as
        select
            '{{ invocation_id }}' as invocation_id,
            '{{ flags.WHICH }}' as command,
            current_timestamp as finished_at
    {%- else -%}
        select 1
    {%- endif -%}
{%- endmacro %}
