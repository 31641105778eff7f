{#-
    The group a generation is counted in by disability: 'neutral' for the
    neutral prompt, else its disability id (the marts that tally generations by
    disability and compare them with the neutral baseline).
-#}
{% macro disability_group(condition='condition', disability_id='disability_id') -%}
    case when {{ condition }} = 'neutral' then 'neutral' else {{ disability_id }} end
{%- endmacro %}
