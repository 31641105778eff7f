{#-
    Each row of `pair_metrics` (a pair x metric, with neutral_generation_id,
    disability_generation_id and metric) with both sides' scores from
    `generation_scores` (int_generation_scores) and their statuses, 'missing'
    when a side has no score row. One join for int_pair_scores and
    int_run_pair_flags.
-#}
{% macro pair_metric_scores(pair_metrics, generation_scores) -%}
    select
        {{ pair_metrics }}.*,
        neutral_scores.score as neutral_score,
        disability_scores.score as disability_score,
        coalesce(neutral_scores.score_status, 'missing') as neutral_score_status,
        coalesce(disability_scores.score_status, 'missing') as disability_score_status

    from {{ pair_metrics }}
    left join {{ generation_scores }} as neutral_scores
        on {{ pair_metrics }}.neutral_generation_id = neutral_scores.generation_id
        and {{ pair_metrics }}.metric = neutral_scores.metric
    left join {{ generation_scores }} as disability_scores
        on {{ pair_metrics }}.disability_generation_id = disability_scores.generation_id
        and {{ pair_metrics }}.metric = disability_scores.metric
{%- endmacro %}
