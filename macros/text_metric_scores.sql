{#
    One metric's scores in the long shape of int_generation_scores, for a scorer
    keyed by response text: every generation gets a row, with the text's score
    under the current scorer version and a status saying why a score is missing
    ('no_text' for a generation without text, 'not_scored' when the scorer has
    no row for the text yet).
#}
{% macro text_metric_scores(generations, scores, metric, score_column, reason_column='null') -%}
    select
        {{ generations }}.generation_id,
        {{ generations }}.model_id,
        {{ generations }}.text_hash,
        '{{ metric }}' as metric,
        cast({{ scores }}.{{ score_column }} as double) as score,
        case
            when {{ generations }}.text_hash is null then 'no_text'
            when {{ scores }}.text_hash is null then 'not_scored'
            else {{ scores }}.status
        end as score_status,
        cast({{ reason_column }} as varchar) as score_reason,
        {{ scores }}.scorer_version
    from {{ generations }}
    left join {{ scores }}
        on {{ generations }}.text_hash = {{ scores }}.text_hash
{%- endmacro %}
