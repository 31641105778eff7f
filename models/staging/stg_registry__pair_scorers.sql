{#
    Every pair scorer of the registry (ableaudit.scorers.pair_registry), one row each, from
    its declaration (macro registered_pair_scorers): its version today (the cosine's for
    var('similarity_model')), its metric's columns (stg_seeds__metrics adds them to the
    other metrics), and its flag rule with its threshold (var('pair_metric_thresholds'),
    else the declared one).
#}
{%- set columns = [
    ['scorer', 'name', 'varchar'],
    ['scorer_version', 'version', 'varchar'],
    ['sql_function', 'sql_function', 'varchar'],
    ['takes_model', 'takes_model', 'boolean'],
    ['metric', 'metric', 'varchar'],
    ['display_name', 'display_name', 'varchar'],
    ['direction', 'direction', 'varchar'],
    ['scale_min', 'scale_min', 'double'],
    ['scale_max', 'scale_max', 'double'],
    ['truncated_pairs', 'truncated_pairs', 'varchar'],
    ['description', 'description', 'varchar'],
    ['threshold', 'threshold', 'double'],
    ['flag_rule', 'flag_rule', 'varchar'],
    ['reference', 'reference', 'double'],
] %}
with

final as (

    {{ literal_rows(registered_pair_scorers(), columns) }}

)

select * from final
