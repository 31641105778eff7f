{#-
    The columns a neutral and a disability-aware answer share when they form a
    pair (int_pairs, int_run_pairs): task, model, arm, query set, query,
    temperature and sample. An answer's unit is these plus its condition and
    disability. Returns a list, for join_keys and partitions.
-#}
{% macro pair_unit_keys() -%}
    {{ return(['task', 'model_id', 'arm', 'query_set', 'query_id', 'temperature', 'sample_index']) }}
{%- endmacro %}
