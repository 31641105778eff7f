{#- Fails on rows where the boolean expression is not true (false or null). -#}
{% test expression_is_true(model, expression, column_name=none) %}
select *
from {{ model }}
where not coalesce({{ expression }}, false)
{% endtest %}
