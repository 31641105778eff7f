{#
    The name of the degradation rule of this build, var('degradation_rule'):
    'strict_relative' (the default) or 'paper_literal'. See macro is_degraded
    and docs/statistics.md. An unknown name stops the build at compile time.
#}
{% macro degradation_rule() -%}
    {%- set rule = var('degradation_rule', 'strict_relative') -%}
    {%- if rule not in ('strict_relative', 'paper_literal') -%}
        {{ exceptions.raise_compiler_error(
            "var degradation_rule must be 'strict_relative' or 'paper_literal'; got '" ~ rule ~ "'"
        ) }}
    {%- endif -%}
    {{ rule }}
{%- endmacro %}
