{#-
    Each breakdown slice partitions the same units as the model's 'overall' row:
    per group (group_by) and slice (all slices but 'overall', or those listed in
    `slices`), the sums of `sum_columns` equal the overall row's. Returns the
    groups where a breakdown adds up to something else (or has no overall row).
-#}
{% test slices_add_up(model, group_by, sum_columns, slices=none) %}

with

source_rows as (

    select * from {{ model }}

),

overall as (

    select * from source_rows
    where slice = 'overall'

),

breakdowns as (

    select
        {%- for column in group_by %}
        {{ column }},
        {%- endfor %}
        slice,
        {%- for column in sum_columns %}
        sum({{ column }}) as {{ column }}{{ "," if not loop.last }}
        {%- endfor %}

    from source_rows
    where slice != 'overall'
    {%- if slices %}
        and slice in ({% for s in slices %}'{{ s }}'{{ ", " if not loop.last }}{% endfor %})
    {%- endif %}
    group by {{ group_by | join(', ') }}, slice

),

final as (

    select
        breakdowns.*,
        {%- for column in sum_columns %}
        overall.{{ column }} as overall_{{ column }}{{ "," if not loop.last }}
        {%- endfor %}

    from breakdowns
    left join overall
        on {{ join_keys('breakdowns', 'overall', group_by) }}
    where
        {%- for column in sum_columns %}
        {{ "or " if not loop.first }}overall.{{ column }} is distinct from breakdowns.{{ column }}
        {%- endfor %}

)

select * from final

{% endtest %}
