{#-
    A pair's status from the statuses of its two answers (columns
    neutral_generation_id, neutral_status, disability_status): the first
    problem found names it, neutral-side problems first; 'complete' when both
    answered. One rule for int_pairs and int_run_pairs.
-#}
{% macro pair_status() -%}
    case
        when neutral_generation_id is null then 'missing_neutral'
        when neutral_status = 'error' then 'neutral_error'
        when neutral_status = 'empty' then 'neutral_empty'
        when disability_status = 'error' then 'disability_error'
        when disability_status = 'empty' then 'disability_empty'
        when neutral_status = 'ok' and disability_status = 'ok' then 'complete'
        else 'unknown_status'
    end
{%- endmacro %}
