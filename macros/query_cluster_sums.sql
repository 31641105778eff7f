{#-
    The query-cluster sums macro cluster_rate_interval needs, per slice (macro slice_pairs) of
    each group: n_clusters (queries with a counted pair), max_pairs_per_cluster, and over the
    queries q of the slice the sums of x_q^2, x_q m_q and m_q^2 (sum_xx, sum_xm, sum_mm), where
    m_q is the query's counted pairs in the slice and x_q its successes.

    `relation` holds one row per counted pair with the columns `group_by`, domain,
    disability_id, query_id and `success` (1 or 0). A query's temperatures and samples are one
    query. Only two narrow aggregations touch the pairs: the slices' counts stay where the mart
    computes them.
-#}
{% macro query_cluster_sums(relation, group_by) -%}
    {%- set keys = group_by | join(', ') -%}
    select
        {{ keys }},
        slice,
        slice_value,
        count(*) as n_clusters,
        max(m_q) as max_pairs_per_cluster,
        sum(x_q * x_q) as sum_xx,
        sum(x_q * m_q) as sum_xm,
        sum(m_q * m_q) as sum_mm
    from (
        select
            {{ keys }},
            slice,
            slice_value,
            query_id,
            count(*) as m_q,
            sum(success) as x_q
        from ({{ slice_pairs(relation) }}) as sliced
        group by {{ keys }}, slice, slice_value, query_id
    ) as per_query
    group by {{ keys }}, slice, slice_value
{%- endmacro %}
