{#-
    One end of the Wilson score interval (95 %: z = 1.96) of the share k / n,
    in percent: bound = -1 for the lower end, +1 for the upper. It treats the n
    pairs as independent draws; null when n = 0 (no evidence, no interval).
-#}
{% macro wilson_bound(k, n, bound) -%}
    {%- set z = 1.959963984540054 -%}
    case when {{ n }} > 0 then
        100.0 * (
            (cast({{ k }} as double) / {{ n }} + {{ z }} * {{ z }} / (2.0 * {{ n }}))
            {{ '-' if bound < 0 else '+' }} {{ z }} * sqrt(
                (cast({{ k }} as double) / {{ n }}) * (1.0 - cast({{ k }} as double) / {{ n }}) / {{ n }}
                + {{ z }} * {{ z }} / (4.0 * {{ n }} * {{ n }})
            )
        ) / (1.0 + {{ z }} * {{ z }} / {{ n }})
    end
{%- endmacro %}
