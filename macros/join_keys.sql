{#-
    A join condition on several key columns: left.c = right.c and ... for each
    column, with `is not distinct from` for the columns listed in `nullable`
    (e.g. temperature, which an imported generation may leave null), so a
    multi-column join is written once per model rather than line by line.
-#}
{% macro join_keys(left, right, columns, nullable=[]) -%}
    {%- for column in columns -%}
        {%- if not loop.first %}
        and {% endif -%}
        {{ left }}.{{ column }} {{ 'is not distinct from' if column in nullable else '=' }} {{ right }}.{{ column }}
    {%- endfor -%}
{%- endmacro %}
