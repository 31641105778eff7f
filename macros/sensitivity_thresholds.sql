{#
    The thresholds of var('sensitivity_thresholds') as a sorted list of distinct
    numbers >= 0 (a single number is a list of one). Anything else stops the
    build at compile time with the var's expected form.
#}
{% macro sensitivity_thresholds() -%}
    {%- set value = var('sensitivity_thresholds', [0, 0.01, 0.05, 0.10, 0.20]) -%}
    {%- set items = [value] if value is number else ([] if value is string else value) -%}
    {%- set levels = [] -%}
    {%- set bad = [] -%}
    {%- for item in items -%}
        {%- if item is not number or item is sameas true or item is sameas false or item < 0 -%}
            {%- do bad.append(item) -%}
        {%- elif (item | float) not in levels -%}
            {%- do levels.append(item | float) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if bad or not levels -%}
        {{ exceptions.raise_compiler_error(
            "var sensitivity_thresholds must be a list of numbers >= 0 such as [0, 0.01, 0.05, 0.10, 0.20]; got "
            ~ value
        ) }}
    {%- endif -%}
    {{ return(levels | sort) }}
{%- endmacro %}
