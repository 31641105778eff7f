{#-
    One field of a usable verdict of one judge kind, read from parsed_json, as
    `cast_to` (default: text); null for other kinds and for verdicts that are not
    usable, so an unparseable verdict never yields a score or a label.
-#}
{% macro verdict_field(kind, field, cast_to=none) -%}
    case
        when is_usable and judge_kind = '{{ kind }}'
            then
            {%- if cast_to %} cast(json_extract(parsed_json, '$.{{ field }}') as {{ cast_to }})
            {%- else %} json_extract_string(parsed_json, '$.{{ field }}')
            {%- endif %}
    end
{%- endmacro %}
