{#-
    Each row of `pair_metrics` (a pair x metric, with neutral_generation_id,
    disability_generation_id and metric) with both sides' scores from
    `generation_scores` (int_generation_scores) and their statuses, 'missing'
    when a side has no score row. One join for int_pair_scores and
    int_run_pair_flags.

    With `masked_scores` (int_generation_masked_scores), a masked scorer's metric
    takes both sides' scores from there instead, for the pair's own category
    (disability_id): the neutral answer masked with its partner's terms.
-#}
{% macro pair_metric_scores(pair_metrics, generation_scores, masked_scores=none) -%}
    {%- set masked = registered_scorers('response_scores_masked') | map(attribute='metric') | list if masked_scores else [] %}
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
    {%- if masked %}
    where {{ pair_metrics }}.metric not in ({{ sql_literals(masked) }})

    union all

    select
        {{ pair_metrics }}.*,
        neutral_scores.score as neutral_score,
        disability_scores.score as disability_score,
        coalesce(neutral_scores.score_status, 'missing') as neutral_score_status,
        coalesce(disability_scores.score_status, 'missing') as disability_score_status

    from {{ pair_metrics }}
    left join {{ masked_scores }} as neutral_scores
        on {{ pair_metrics }}.neutral_generation_id = neutral_scores.generation_id
        and {{ pair_metrics }}.metric = neutral_scores.metric
        and {{ pair_metrics }}.disability_id = neutral_scores.mask_disability_id
    left join {{ masked_scores }} as disability_scores
        on {{ pair_metrics }}.disability_generation_id = disability_scores.generation_id
        and {{ pair_metrics }}.metric = disability_scores.metric
        and {{ pair_metrics }}.disability_id = disability_scores.mask_disability_id
    where {{ pair_metrics }}.metric in ({{ sql_literals(masked) }})
    {%- endif %}
{%- endmacro %}
