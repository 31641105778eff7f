{#
    Every scorer of the registry (ableaudit.scorers.registry), one row each,
    from its declaration (macro registered_scorers): its version today, the
    model that holds its scores and, for a metric, the columns of the metrics
    (stg_seeds__metrics takes them from here; the seed holds only the metrics
    no scorer declares).
#}
{%- set scorers = registered_scorers() %}
with

final as (

    {%- for s in scorers %}
    select
        {{ scorer_literal(s.name) }} as scorer,
        {{ scorer_literal(s.version) }} as scorer_version,
        {{ scorer_literal(s.sql_function) }} as sql_function,
        {{ scorer_literal(s.model) }} as score_model,
        {{ scorer_literal(s.reads) }} as reads,
        {{ scorer_literal(s.metric) }} as metric,
        {{ scorer_literal(s.display_name) }} as display_name,
        {{ scorer_literal(s.direction) }} as direction,
        {{ scorer_literal(s.scale_min, 'double') }} as scale_min,
        {{ scorer_literal(s.scale_max, 'double') }} as scale_max,
        {{ scorer_literal(s.truncated_pairs) }} as truncated_pairs,
        {{ scorer_literal(s.description) }} as description
    {{ 'union all' if not loop.last }}
    {%- else %}
    select
        cast(null as varchar) as scorer,
        cast(null as varchar) as scorer_version,
        cast(null as varchar) as sql_function,
        cast(null as varchar) as score_model,
        cast(null as varchar) as reads,
        cast(null as varchar) as metric,
        cast(null as varchar) as display_name,
        cast(null as varchar) as direction,
        cast(null as double) as scale_min,
        cast(null as double) as scale_max,
        cast(null as varchar) as truncated_pairs,
        cast(null as varchar) as description
    where false
    {%- endfor %}

)

select * from final
