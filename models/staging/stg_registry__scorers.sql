{#
    Every scorer of the registry (ableaudit.scorers.registry), one row each,
    from its declaration (macro registered_scorers): its version today, the
    model that holds its scores and, for a metric, the columns of the metrics
    (stg_seeds__metrics takes them from here; the seed holds only the metrics
    no scorer declares), and a flag rule of its own with its threshold
    (var('pair_metric_thresholds'), else the declared one; null for the
    metrics flagged by Eq. 1).
#}
{%- set columns = [
    ['scorer', 'name', 'varchar'],
    ['scorer_version', 'version', 'varchar'],
    ['sql_function', 'sql_function', 'varchar'],
    ['score_model', 'model', 'varchar'],
    ['reads', 'reads', 'varchar'],
    ['metric', 'metric', 'varchar'],
    ['display_name', 'display_name', 'varchar'],
    ['direction', 'direction', 'varchar'],
    ['scale_min', 'scale_min', 'double'],
    ['scale_max', 'scale_max', 'double'],
    ['truncated_pairs', 'truncated_pairs', 'varchar'],
    ['description', 'description', 'varchar'],
    ['flag_rule', 'flag_rule', 'varchar'],
    ['threshold', 'threshold', 'double'],
] %}
with

final as (

    {{ literal_rows(registered_scorers(), columns) }}

)

select * from final
