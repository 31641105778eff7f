{#-
    The columns that identify a disability / neutral pair (int_pairs' grain),
    in their canonical order: pair_id, then the pair key it hashes (task, model,
    arm, query set, query, disability, temperature, sample) with the domain.
    Every pair-grain model selects them first, through this macro, so the key
    is spelled once. Renders a comma-separated list with a trailing comma.
-#}
{% macro pair_columns(relation=none) -%}
    {%- set prefix = (relation ~ '.') if relation else '' -%}
    {%- for column in ['pair_id', 'task', 'model_id', 'arm', 'query_set', 'query_id', 'domain', 'disability_id', 'temperature', 'sample_index'] %}
        {{ prefix }}{{ column }},
    {%- endfor %}
{%- endmacro %}
