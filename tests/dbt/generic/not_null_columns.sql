{#-
    Fails on each row where one of the columns is null; null_columns names them. One query
    (and one dbt node) per model, where dbt's not_null runs one per column: each node costs
    dbt tens of milliseconds whatever the data, and per column they were half of a build's
    data tests.
-#}
{% test not_null_columns(model, columns) %}
select
    *,
    concat_ws(
        ', '
        {%- for column in columns %},
        case when {{ column }} is null then '{{ column }}' end
        {%- endfor %}
    ) as null_columns
from {{ model }}
where
    false
    {%- for column in columns %}
    or {{ column }} is null
    {%- endfor %}
{% endtest %}
