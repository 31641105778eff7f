{#
    A stable surrogate key: sha256 over the columns, '|'-separated, with null
    spelled '<null>' so (a, null) and (null, a) never collide.
#}
{% macro hash_key(columns) -%}
    {%- set parts -%}
        concat_ws('|'
        {%- for column in columns %},
            coalesce(cast({{ column }} as varchar), '<null>')
        {%- endfor %})
    {%- endset -%}
    {{ sha256_hex(parts) }}
{%- endmacro %}
