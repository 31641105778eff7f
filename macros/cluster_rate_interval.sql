{#-
    A rate's 95 % interval that counts each query once where its pairs are not independent
    (docs/statistics.md, "A rate's interval"): the select-list columns design_effect,
    rate_ci_low_pct, rate_ci_high_pct and rate_ci_method of the share x / n.

    Arguments are columns of one row per slice: x the pairs counted as a success (degraded,
    labelled Yes), n the pairs counted, and the query-cluster sums of macro query_cluster_sums
    (n_clusters, max_per_cluster, sum_xx, sum_xm, sum_mm). The residual sum of squares over
    the queries, sum_q (x_q - p m_q)^2 with p = x / n, is computed from them in 128-bit integers
    (n^2 sum_xx - 2 n x sum_xm + x^2 sum_mm, over n^2), so that it is exactly 0 when every query
    has the slice's rate.

    rate_ci_method:
      'wilson'                every query gives one pair (disability slices of one sample):
                              the Wilson score interval of x of n, as macro wilson_bound
      'wilson_design_effect'  a query gives several pairs (one neutral answer shared by the
                              nine categories; several temperatures or samples): the Wilson
                              interval at the effective number of pairs, n / design_effect,
                              with Student's t at n_clusters - 1 degrees of freedom in place of
                              the normal quantile (Korn & Graubard's degrees-of-freedom
                              adjustment). The design effect is the cluster-robust (sandwich)
                              variance of p, n_clusters / (n_clusters - 1) x sum_q (x_q - p m_q)^2 / n^2,
                              over the binomial p (1 - p) / n, at least 1; 1 when p is 0 or 1
                              (no spread to estimate it from), as the NCHS standards for
                              proportions do
      'one_query'             one query gives several pairs: nothing to estimate the spread
                              between queries from, so no interval (NULL)
      NULL                    no pair counted, no interval
-#}
{% macro cluster_rate_interval(x, n, n_clusters, max_per_cluster, sum_xx, sum_xm, sum_mm) -%}
    {%- set p -%}(cast({{ x }} as double) / {{ n }}){%- endset -%}
    {%- set residual_ss -%}
        (cast(
            cast({{ n }} as hugeint) * {{ n }} * {{ sum_xx }}
            - 2 * cast({{ n }} as hugeint) * {{ x }} * {{ sum_xm }}
            + cast({{ x }} as hugeint) * {{ x }} * {{ sum_mm }}
            as double
        ) / (cast({{ n }} as double) * {{ n }}))
    {%- endset -%}
    {%- set method -%}
        case
            when {{ n }} = 0 then null
            when {{ max_per_cluster }} <= 1 then 'wilson'
            when {{ n_clusters }} < 2 then 'one_query'
            else 'wilson_design_effect'
        end
    {%- endset -%}
    {%- set design_effect -%}
        case
            when {{ max_per_cluster }} <= 1 or {{ n_clusters }} < 2 or {{ x }} = 0 or {{ x }} = {{ n }} or {{ residual_ss }} <= 0 then 1.0
            else greatest(
                1.0,
                cast({{ n_clusters }} as double) * {{ residual_ss }}
                / (({{ n_clusters }} - 1) * {{ n }} * {{ p }} * (1.0 - {{ p }}))
            )
        end
    {%- endset -%}
    {%- set n_eff -%}(cast({{ n }} as double) / ({{ design_effect }})){%- endset -%}
    {%- set q -%}
        case
            when {{ max_per_cluster }} <= 1 then 1.959963984540054
            else ableaudit_t_quantile(0.975, cast({{ n_clusters }} - 1 as double))
        end
    {%- endset -%}
    {%- set usable -%}{{ n }} > 0 and ({{ max_per_cluster }} <= 1 or {{ n_clusters }} >= 2){%- endset -%}
    case when {{ usable }} then {{ design_effect }} end as design_effect,
    {%- for name, sign, exact in [('rate_ci_low_pct', '-', x ~ ' = 0'), ('rate_ci_high_pct', '+', x ~ ' = ' ~ n)] %}
    case
        when not ({{ usable }}) then null
        -- the end at 0 % (no success) or 100 % (all) is exact, not a rounding away from it
        when {{ exact }} then {{ '0.0' if sign == '-' else '100.0' }}
        else 100.0 * (
            ({{ p }} + ({{ q }}) * ({{ q }}) / (2.0 * {{ n_eff }}))
            {{ sign }} ({{ q }}) * sqrt(
                {{ p }} * (1.0 - {{ p }}) / {{ n_eff }}
                + ({{ q }}) * ({{ q }}) / (4.0 * {{ n_eff }} * {{ n_eff }})
            )
        ) / (1.0 + ({{ q }}) * ({{ q }}) / {{ n_eff }})
    end as {{ name }},
    {%- endfor %}
    {{ method }} as rate_ci_method
{%- endmacro %}
