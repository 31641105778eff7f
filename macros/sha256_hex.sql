{#- sha256 of a text as 64 lowercase hex characters (null in, null out); dispatched by adapter. -#}
{% macro sha256_hex(expression) -%}
    {{ return(adapter.dispatch('sha256_hex', 'ableaudit')(expression)) }}
{%- endmacro %}

{% macro default__sha256_hex(expression) -%}
    sha256({{ expression }})
{%- endmacro %}

{% macro postgres__sha256_hex(expression) -%}
    encode(sha256(convert_to({{ expression }}, 'UTF8')), 'hex')
{%- endmacro %}

{% macro snowflake__sha256_hex(expression) -%}
    sha2({{ expression }}, 256)
{%- endmacro %}

{% macro bigquery__sha256_hex(expression) -%}
    to_hex(sha256({{ expression }}))
{%- endmacro %}
