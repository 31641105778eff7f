{#-
    The latest landed answer of each unit of `relation` (generations): one row
    per task, model, arm, query set, query, condition, disability, temperature
    and sample (macro pair_unit_keys), within the columns of `within` (e.g. a
    run), the newest created_at winning (generation_id breaks ties). The
    current state of int_pairs, and each cohort of int_run_pairs.
-#}
{% macro latest_answers(relation, within=[]) -%}
    select * from {{ relation }}
    qualify row_number() over (
        partition by {{ (within + pair_unit_keys() + ['condition', 'disability_id']) | join(', ') }}
        order by created_at desc nulls last, generation_id desc
    ) = 1
{%- endmacro %}
