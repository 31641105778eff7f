{#-
    A model's rules on single rows, in one query and one dbt node: fails on each row that
    breaks one of them, and its failed_checks names the rules it breaks. dbt spends tens of
    milliseconds on every test node whatever the data; one node per rule (dbt's not_null and
    accepted_values, an expression or a range each) were two thirds of a build's test nodes.

    not_null: columns that may not be null.
    accepted_values: {column: [values]}; strings are quoted, numbers and booleans are not; a
        null passes (as with dbt's accepted_values).
    between: {column: {min: x, max: y}}, either bound optional, both inclusive; a null passes.
    expressions: boolean SQL over one row that must be true (false or null fails).
-#}
{% test row_checks(model, not_null=[], accepted_values={}, between={}, expressions=[]) %}
{%- set checks = [] -%}
{%- for column in not_null -%}
    {%- do checks.append((column ~ " is not null", column ~ " is not null")) -%}
{%- endfor -%}
{%- for column, values in accepted_values.items() -%}
    {%- set literals = [] -%}
    {%- for value in values -%}
        {%- do literals.append(value if value is number else "'" ~ (value | replace("'", "''")) ~ "'") -%}
    {%- endfor -%}
    {%- set rule = column ~ " in (" ~ (literals | join(", ")) ~ ")" -%}
    {%- do checks.append((rule, column ~ " is null or " ~ rule)) -%}
{%- endfor -%}
{%- for column, bounds in between.items() -%}
    {%- set parts = [] -%}
    {%- if bounds.get("min") is not none %}{% do parts.append(column ~ " >= " ~ bounds["min"]) %}{% endif -%}
    {%- if bounds.get("max") is not none %}{% do parts.append(column ~ " <= " ~ bounds["max"]) %}{% endif -%}
    {%- if not parts -%}
        {{ exceptions.raise_compiler_error("row_checks on " ~ model ~ ": between." ~ column ~ " needs min or max") }}
    {%- endif -%}
    {%- set rule = parts | join(" and ") -%}
    {%- do checks.append((rule, column ~ " is null or (" ~ rule ~ ")")) -%}
{%- endfor -%}
{%- for expression in expressions -%}
    {%- do checks.append((expression.split() | join(" "), expression)) -%}
{%- endfor -%}
{%- if not checks -%}
    {{ exceptions.raise_compiler_error("row_checks on " ~ model ~ " lists no rule") }}
{%- endif %}
with

checked as (

    select
        *,
        {%- for name, condition in checks %}
        coalesce(({{ condition }}), false) as __check_{{ loop.index }}{{ "," if not loop.last }}
        {%- endfor %}
    from {{ model }}

)

select
    * exclude (
        {%- for _ in checks %}__check_{{ loop.index }}{{ ", " if not loop.last }}{% endfor -%}
    ),
    concat_ws(
        '; '
        {%- for name, _ in checks %},
        case when not __check_{{ loop.index }} then '{{ name | replace("'", "''") }}' end
        {%- endfor %}
    ) as failed_checks
from checked
where not (
    {%- for _ in checks %}
    __check_{{ loop.index }}{{ " and" if not loop.last }}
    {%- endfor %}
)
{% endtest %}
