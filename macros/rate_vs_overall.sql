{#-
    Does a slice's rate differ from the overall rate of its group, as far as its interval
    (rate_ci_low_pct, rate_ci_high_pct of macro cluster_rate_interval) says? 'above' when the
    whole interval lies above the group's overall rate (`rate` of its slice 'overall' row),
    'below' when it lies below, 'within' when it contains it; null for the overall row itself
    and for a slice without an interval. `partition` names the columns of a group (every
    slice of one model, arm, query set and metric). The report shades a domain or disability
    cell by this column alone (docs/report.md, "How the shaded tables are shaded").
-#}
{% macro rate_vs_overall(rate, partition) -%}
    {%- set overall -%}
        max(case when slice = 'overall' then {{ rate }} end) over (partition by {{ partition | join(', ') }})
    {%- endset -%}
    case
        when slice = 'overall' or rate_ci_low_pct is null or ({{ overall }}) is null then null
        when rate_ci_low_pct > {{ overall }} then 'above'
        when rate_ci_high_pct < {{ overall }} then 'below'
        else 'within'
    end
{%- endmacro %}
