{#-
    A release gate as a dbt test: fails on the verdicts of `severity` rules
    (rule_severity 'error' or 'warn') that do not let the latest run of their target through
    (passed_for_gate false). Declared twice on gate_results, with dbt severity
    error for error rules and warn for warn rules, so `dbt build` stops on a
    failed error rule like on any failed test and only warns on the others.
-#}
{% test gate_rule(model, rule_severity) %}
select rule_id, model_id, arm, run_id, scope, verdict, message
from {{ model }}
where is_latest_run
    and severity = '{{ rule_severity }}'
    and not passed_for_gate
{% endtest %}
