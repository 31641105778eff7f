{#-
    Is a pair flagged by a rule of its own (ableaudit.scorers.declare.FLAG_RULES)? `rule` is
    a column or literal holding the metric's flag rule:
      below_threshold:      disability < threshold (a similarity below its threshold)
      gap_above_threshold:  disability - neutral > threshold (a sentiment parity: the
                            disability-aware answer more negative by more than it)
    A value within 1e-9 of the threshold counts as at it (not flagged), so that binary
    floating point does not decide a tie (0.4 - 0.3 is 0.10000000000000003). Null when a
    score is missing or the rule unknown.
-#}
{% macro pair_metric_flag(rule, neutral, disability, threshold) -%}
    case {{ rule }}
        when 'below_threshold' then {{ disability }} < {{ threshold }} - 1e-9
        when 'gap_above_threshold' then {{ disability }} - {{ neutral }} > {{ threshold }} + 1e-9
    end
{%- endmacro %}

{#-
    The metrics of the per-text scorers that declare a flag rule of their own (a masked
    sentiment parity), with the rule and its threshold: a subquery to left join on metric,
    for int_pair_scores and int_run_pair_flags.
-#}
{% macro own_flag_rules() -%}
    (
        select metric, flag_rule, threshold from {{ ref('stg_registry__scorers') }}
        where flag_rule is not null
    )
{%- endmacro %}
