{#
    The reuse key of a node: everything a result the node keeps from an earlier build
    depends on besides the rows it reads, derived from dbt's graph and the code, never listed
    by hand (docs/incremental.md, "When a build is a full one"). An incremental or
    model-by-model model builds only what is new while its key is the one it recorded; any
    other key rebuilds it in full. A Python model reads its key with its own source
    (macro py_script_comment, ableaudit.stats.reuse.code_digest).

    - the node and every ancestor (graph.nodes and graph.sources, through depends_on.nodes,
      to the seeds and sources): its checksum (its file: a model's code, a seed's rows) and its
      config (materialization, hooks, and meta, where a Python model's vars are rendered);
    - the project's macros (their code; macro reuse_project_macros);
    - every var named (`var('...')`) in the code of the node, of its ancestors, and of the
      macros they call (depends_on.macros, and theirs), with its value in this invocation: a
      var nothing upstream reads changes no key;
    - dbt's version, and the code the dbt-duckdb plugin runs (its UDFs, the scorers, with
      the versions of the libraries they import: DuckDB, dbt-duckdb, VADER, transformers), by
      the UDF ableaudit_code_digest (ableaudit.dbt.code);
    - `extra`: what the node reads that the graph does not hold (a digest of landed rows).
#}
{% macro reuse_key(extra=[], node_id=none) -%}
    {%- if not execute -%}
        {{ return('(not executed)') }}
    {%- endif -%}
    {{ return(local_md5(reuse_key_parts(node_id or model.unique_id, extra) | join('\n'))) }}
{%- endmacro %}

{#- What reuse_key digests for node `node_id`, one string each. -#}
{% macro reuse_key_parts(node_id, extra=[]) -%}
    {%- set lineage = reuse_lineage(node_id) -%}
    {%- set parts = ['dbt ' ~ dbt_version] -%}
    {%- set code = [] -%}
    {%- set called = [] -%}
    {%- for unique_id in lineage -%}
        {%- set node = graph.nodes.get(unique_id) or graph.sources.get(unique_id) -%}
        {%- set checksum = (node.get('checksum') or {}).get('checksum', '') -%}
        {%- do parts.append(unique_id ~ ' ' ~ checksum ~ ' ' ~ tojson(node.get('config', {}), sort_keys=true)) -%}
        {%- do code.append(node.get('raw_code') or '') -%}
        {%- do called.extend((node.get('depends_on') or {}).get('macros') or []) -%}
    {%- endfor -%}
    {%- set macros = reuse_project_macros() -%}
    {%- for macro_id in reuse_macro_closure(called) -%}
        {%- do code.append(macros[macro_id].macro_sql) -%}
    {%- endfor -%}
    {%- for macro_id in macros | sort -%}
        {%- do parts.append(macro_id ~ '\n' ~ macros[macro_id].macro_sql) -%}
    {%- endfor -%}
    {%- set names = modules.re.findall("\\bvar\\(\\s*['\"]([A-Za-z0-9_]+)['\"]", code | join('\n')) -%}
    {%- for name in names | unique | sort -%}
        {%- do parts.append('var ' ~ name ~ '=' ~ (var(name, none) | string)) -%}
    {%- endfor -%}
    {%- set query -%}
        select ableaudit_code_digest('ableaudit.dbt.plugin')
    {%- endset -%}
    {%- do parts.append('plugin ' ~ run_query(query).columns[0].values()[0]) -%}
    {%- for value in extra -%}
        {%- do parts.append(value | string) -%}
    {%- endfor -%}
    {{ return(parts) }}
{%- endmacro %}

{#- Node `node_id` and every node and source it reads, directly or not: unique ids, sorted. -#}
{% macro reuse_lineage(node_id) -%}
    {%- set seen = [node_id] -%}
    {%- set state = namespace(frontier=[node_id]) -%}
    {%- for _ in range(graph.nodes | length) if state.frontier -%}
        {%- set next = [] -%}
        {%- for unique_id in state.frontier -%}
            {%- set node = graph.nodes.get(unique_id) or graph.sources.get(unique_id) or {} -%}
            {%- for parent in (node.get('depends_on') or {}).get('nodes') or [] -%}
                {%- if parent not in seen -%}
                    {%- do seen.append(parent) -%}
                    {%- do next.append(parent) -%}
                {%- endif -%}
            {%- endfor -%}
        {%- endfor -%}
        {%- set state.frontier = next -%}
    {%- endfor -%}
    {{ return(seen | sort) }}
{%- endmacro %}

{#-
    The project's macros, by unique id: dbt's parsed macro (unique_id, macro_sql, depends_on).
    Read from the project's namespace of the context (`context[project_name]`, each entry the
    macro dbt calls), since dbt's `graph` holds nodes and sources, not macros.
-#}
{% macro reuse_project_macros() -%}
    {%- set found = {} -%}
    {%- for name, generator in (context.get(project_name) or {}) | dictsort -%}
        {%- do found.update({generator.macro.unique_id: generator.macro}) -%}
    {%- endfor -%}
    {{ return(found) }}
{%- endmacro %}

{#-
    The project's macros among `called` and every project macro they call (depends_on.macros),
    sorted. Another package's macros (dbt's, the adapter's) are dbt's and the adapter's code,
    which their versions in the key cover.
-#}
{% macro reuse_macro_closure(called) -%}
    {%- set macros = reuse_project_macros() -%}
    {%- set seen = [] -%}
    {%- set state = namespace(frontier=called | unique | list) -%}
    {%- for _ in range(macros | length) if state.frontier -%}
        {%- set next = [] -%}
        {%- for macro_id in state.frontier -%}
            {%- if macro_id in macros and macro_id not in seen -%}
                {%- do seen.append(macro_id) -%}
                {%- do next.extend(macros[macro_id].depends_on.macros or []) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- set state.frontier = next -%}
    {%- endfor -%}
    {{ return(seen | sort) }}
{%- endmacro %}

{#-
    dbt's hook into the code it compiles for a Python model: the model's reuse key, as a
    comment of that code. The statistics marts digest their own source
    (ableaudit.stats.reuse.code_digest(__file__)), and so this key with it.
-#}
{% macro py_script_comment() -%}
# reuse key (macro reuse_key): {{ reuse_key() }}
{%- endmacro %}

{#-
    `dbt run-operation print_reuse_keys --args '{models: [int_pair_scores]}'`: each model's
    reuse key, and what it digests with `parts: true`.
-#}
{% macro print_reuse_keys(models, parts=false) -%}
    {%- for name in models -%}
        {%- set node_id = 'model.' ~ project_name ~ '.' ~ name -%}
        {%- if node_id not in graph.nodes -%}
            {{ exceptions.raise_compiler_error('no model ' ~ name ~ ' in the project') }}
        {%- endif -%}
        {%- do print(name ~ ' ' ~ reuse_key(node_id=node_id)) -%}
        {%- if parts -%}
            {%- for part in reuse_key_parts(node_id) -%}
                {%- do print('    ' ~ (part | replace('\n', ' '))[:200]) -%}
            {%- endfor -%}
        {%- endif -%}
    {%- endfor -%}
{%- endmacro %}
