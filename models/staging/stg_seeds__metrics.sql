{#
    Every metric: those the scorers declare (stg_registry__scorers, from the
    registry), those the pair scorers declare (stg_registry__pair_scorers), and the
    others, kept in seed `metrics` (judge_score).
#}
{%- set columns = [
    'metric', 'display_name', 'direction', 'scale_min', 'scale_max', 'truncated_pairs', 'description',
] %}
with

declared as (

    select {{ columns | join(', ') }}
    from {{ ref('stg_registry__scorers') }}
    where metric is not null

),

paired as (

    select {{ columns | join(', ') }}
    from {{ ref('stg_registry__pair_scorers') }}

),

seeded as (

    select {{ columns | join(', ') }}
    from {{ ref('metrics') }}

),

final as (

    select * from declared
    union all
    select * from paired
    union all
    select * from seeded

)

select * from final
