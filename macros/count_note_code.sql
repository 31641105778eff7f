{#
    How many of a verdict's parse notes carry a note code. parse_notes is a JSON
    array of "code: detail" strings (codes: ableaudit.judges.parsing.NOTE_CODES),
    e.g. count_note_code('parse_notes', 'span_not_found'). 0 when there are none.
#}
{% macro count_note_code(notes, code) -%}
    {{ return(adapter.dispatch('count_note_code', 'ableaudit')(notes, code)) }}
{%- endmacro %}

{% macro default__count_note_code(notes, code) -%}
    coalesce(
        len(list_filter(from_json({{ notes }}, '["VARCHAR"]'), lambda note: starts_with(note, '{{ code }}:'))),
        0
    )
{%- endmacro %}
