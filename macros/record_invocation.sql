{#
    Every dbt command that runs on this warehouse, in dbt_state.invocations: its
    invocation id, command, a digest of its --vars, its selection, when it started
    and when it finished. A row is added when the command starts (on-run-start) and
    finished when it ends (on-run-end), so a run stopped midway is recorded too.
    `ableaudit build` trusts its stamp (dbt_state.build_stamp) only while the last
    row is the build that wrote it: a `dbt build --vars ...`, a `dbt seed`, an
    `ableaudit gate` or a training flow's build in between makes the next build a
    full one (ableaudit.dbt.build_stamp, docs/incremental.md).
#}
{% macro record_invocation(moment) -%}
    {%- if execute -%}
        create schema if not exists dbt_state;
        create table if not exists dbt_state.invocations (
            seq integer,
            invocation_id varchar,
            command varchar,
            vars_digest varchar,
            selection varchar,
            started_at timestamp,
            finished_at timestamp
        );
        {%- if moment == 'start' %}
            {%- set args = invocation_args_dict -%}
            {%- set selection = tojson({
                'select': args.get('select'),
                'exclude': args.get('exclude'),
                'selector': args.get('selector'),
            }) %}
        insert into dbt_state.invocations
        select
            coalesce(max(seq), 0) + 1,
            '{{ invocation_id }}',
            '{{ flags.WHICH }}',
            '{{ local_md5(tojson(args.get("vars") or {}, sort_keys=true)) }}',
            '{{ selection | replace("'", "''") }}',
            current_timestamp,
            null
        from dbt_state.invocations;
        {%- else %}
        update dbt_state.invocations set finished_at = current_timestamp
        where invocation_id = '{{ invocation_id }}';
        {%- endif %}
    {%- else -%}
        select 1
    {%- endif -%}
{%- endmacro %}
