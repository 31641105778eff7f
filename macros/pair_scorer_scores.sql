{#-
    Each row of `pairs` (with neutral_generation_id, disability_generation_id, pair_status
    and truncated) x each pair scorer of `pair_scorers` (stg_registry__pair_scorers), with
    the pair's two scores from `scores` (response_pair_scores, the scorer's current version)
    by the texts of its generations (`generations`: generation_id, text_hash), in the
    columns pair_metric_scores gives a per-text metric, and the scorer's threshold and flag
    rule (as threshold and degradation_rule; is_pair_metric true). A side without text is 'no_text'; a pair of
    texts not scored yet is 'not_scored'. One join for int_pair_scores and
    int_run_pair_flags.
-#}
{% macro pair_scorer_scores(pairs, pair_scorers, generations, scores) -%}
    select
        {{ pairs }}.*,
        {{ pair_scorers }}.metric,
        {{ pair_scorers }}.metric as base_metric,
        cast(null as varchar) as judge_name,
        {{ pair_scorers }}.direction,
        {{ pair_scorers }}.truncated_pairs,
        pair_values.neutral_score,
        pair_values.disability_score,
        case
            when neutral_texts.text_hash is null then 'no_text'
            when pair_values.scorer is null then 'not_scored'
            else pair_values.status
        end as neutral_score_status,
        case
            when disability_texts.text_hash is null then 'no_text'
            when pair_values.scorer is null then 'not_scored'
            else pair_values.status
        end as disability_score_status,
        {{ pair_scorers }}.threshold,
        {{ pair_scorers }}.flag_rule as degradation_rule,
        true as is_pair_metric

    from {{ pairs }}
    cross join {{ pair_scorers }}
    left join {{ generations }} as neutral_texts
        on {{ pairs }}.neutral_generation_id = neutral_texts.generation_id
    left join {{ generations }} as disability_texts
        on {{ pairs }}.disability_generation_id = disability_texts.generation_id
    left join {{ scores }} as pair_values
        on neutral_texts.text_hash = pair_values.neutral_text_hash
        and disability_texts.text_hash = pair_values.disability_text_hash
        and {{ pair_scorers }}.scorer = pair_values.scorer
        and {{ pair_scorers }}.scorer_version = pair_values.scorer_version
{%- endmacro %}
