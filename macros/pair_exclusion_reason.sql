{#-
    Why a pair x metric does not enter a rate (null: it does): the pair is not
    complete, it was cut off at the token cap and the metric excludes such
    pairs (seed metrics.truncated_pairs), or a score is missing. Reads the
    columns pair_status, truncated, truncated_pairs, neutral_score,
    disability_score, neutral_score_status and disability_score_status.
    One rule for int_pair_scores and int_run_pair_flags.
-#}
{% macro pair_exclusion_reason() -%}
    case
        when pair_status != 'complete' then pair_status
        when truncated and truncated_pairs = 'exclude' then 'truncated_answer'
        when neutral_score is null then 'neutral_score_' || neutral_score_status
        when disability_score is null then 'disability_score_' || disability_score_status
    end
{%- endmacro %}
