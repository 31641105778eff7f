{#
    The pair scorers of the registry (ableaudit.scorers.pair_registry, one declaration
    each), read at run time through the plugin's UDF ableaudit_pair_scorer_catalog for the
    embedding model of var('similarity_model'): a list of dicts with name, version,
    sql_function, takes_model, metric, threshold, flag_rule, reference and the metric's
    columns (display_name, direction, scale_min, scale_max, truncated_pairs, description).
    A metric named in var('pair_metric_thresholds') takes its threshold from there, the
    others keep their declared one; the var may also name a per-text scorer with a flag
    rule of its own (a masked sentiment parity, macro registered_scorers). Empty while dbt
    parses.
#}
{% macro registered_pair_scorers() -%}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set query -%}
        select ableaudit_pair_scorer_catalog('{{ (var("similarity_model") or "") | replace("'", "''") }}')
    {%- endset -%}
    {%- set scorers = fromjson(run_query(query).columns[0].values()[0]) -%}
    {%- set thresholds = var('pair_metric_thresholds') or {} -%}
    {%- if thresholds is not mapping -%}
        {{ exceptions.raise_compiler_error(
            "var pair_metric_thresholds: give a mapping of pair metric to threshold, e.g. "
            ~ "--vars '{pair_metric_thresholds: {cosine_similarity: 0.75}}'") }}
    {%- endif -%}
    {%- set names = (scorers | map(attribute='name') | list)
        + (registered_scorers() | selectattr('flag_rule') | map(attribute='name') | list) -%}
    {%- for name, value in thresholds | dictsort -%}
        {%- if name not in names -%}
            {{ exceptions.raise_compiler_error(
                "var pair_metric_thresholds names '" ~ name ~ "', which is no pair metric; known: "
                ~ (names | join(', '))) }}
        {%- endif -%}
        {%- if value is not number or value is boolean -%}
            {{ exceptions.raise_compiler_error(
                "var pair_metric_thresholds: the threshold of " ~ name ~ " is '" ~ value
                ~ "'; give a number (e.g. " ~ name ~ ": 0.75)") }}
        {%- endif -%}
    {%- endfor -%}
    {%- for s in scorers if s.name in thresholds -%}
        {%- do s.update({'threshold': thresholds[s.name]}) -%}
    {%- endfor -%}
    {{ return(scorers) }}
{%- endmacro %}

{#
    The pair scorers' versions and thresholds (and those of the per-text scorers with a flag
    rule of their own), as a list of one string for a settings digest
    (macro incremental_plan's `extra`): a pair score kept by a model built incrementally is
    valid while these are the same. A version can change with no var or code changed (the
    files of the local folder var('similarity_model') names).
#}
{% macro pair_scorer_versions() -%}
    {%- set parts = [] -%}
    {%- for s in registered_pair_scorers() + (registered_scorers() | selectattr('flag_rule') | list) -%}
        {%- do parts.append(s.name ~ '=' ~ s.version ~ '@' ~ s.threshold) -%}
    {%- endfor -%}
    {{ return(['pair scorers ' ~ (parts | join(','))]) }}
{%- endmacro %}
