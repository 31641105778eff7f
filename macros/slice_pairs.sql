{#
    Every row of `relation` once per slice a pair-level mart reports:
    ('overall', 'all'), ('domain', <domain>), ('disability', <disability_id>)
    and ('domain_disability', '<domain>|<disability_id>'). The one place where
    slices are defined (degradation, interpretive_shift): add one here (e.g.
    gender or race for vision pairs) and every mart reports it.
#}
{% macro slice_pairs(relation) -%}
    select *, 'overall' as slice, 'all' as slice_value from {{ relation }}
    union all
    select *, 'domain' as slice, domain as slice_value from {{ relation }}
    union all
    select *, 'disability' as slice, disability_id as slice_value from {{ relation }}
    union all
    select *, 'domain_disability' as slice, domain || '|' || disability_id as slice_value from {{ relation }}
{%- endmacro %}
