{#
    Every dimension of every dimension set the contrastive judges know, one row per
    prompt version and dimension: the built-in set (from the package, macro
    builtin_dimension_sets) and the sets of users' own that landed with their verdicts
    (stg_raw__judge_dimension_sets). How a verdict's answer on the dimension is read: its
    field in parsed_json, its answers from the best to the worst (value_labels) and the
    position from which an answer flags the pair (flag_position). abstain (response B
    declines) is a dimension of every set.
#}
{%- set builtin = builtin_dimension_sets() %}
with

landed_sets as (

    select * from {{ ref('stg_raw__judge_dimension_sets') }}

),

builtin_sets as (

    {%- for s in builtin %}
        select
            {{ scorer_literal(s.prompt_version) }} as prompt_version,
            {{ scorer_literal(s.name) }} as dimension_set,
            {{ scorer_literal(s.definition) }} as definition,
            true as is_builtin,
            {{ 'true' if s.is_default else 'false' }} as is_default,
            cast(null as timestamp) as first_landed_at
        {{ 'union all' if not loop.last }}
    {%- else %}
    -- while dbt parses: the columns, no rows
    select
        cast(null as varchar) as prompt_version,
        cast(null as varchar) as dimension_set,
        cast(null as varchar) as definition,
        true as is_builtin,
        false as is_default,
        cast(null as timestamp) as first_landed_at
    where false
    {%- endfor %}

),

dimension_sets as (

    select * from builtin_sets
    union all
    select
        prompt_version,
        dimension_set,
        definition,
        false as is_builtin,
        false as is_default,
        first_landed_at
    from landed_sets
    where prompt_version not in (select builtin_sets.prompt_version from builtin_sets)

),

dimensions as (

    select
        prompt_version,
        dimension_set,
        is_builtin,
        is_default,
        first_landed_at,
        unnest(from_json(
            json_extract(definition, '$.dimensions'),
            '[{"name": "VARCHAR", "position": "INTEGER", "field": "VARCHAR", "kind": "VARCHAR",
              "question": "VARCHAR", "values": ["VARCHAR"], "flag_position": "INTEGER",
              "worse": "VARCHAR", "spans": "BOOLEAN"}]'
        )) as declared

    from dimension_sets

),

final as (

    select
        prompt_version,
        dimension_set,
        is_builtin,
        is_default,
        first_landed_at,
        struct_extract(declared, 'name') as dimension,
        struct_extract(declared, 'position') as dimension_position,
        struct_extract(declared, 'field') as verdict_field,
        struct_extract(declared, 'kind') as answer_kind,
        struct_extract(declared, 'question') as question,
        struct_extract(declared, 'values') as value_labels,
        len(struct_extract(declared, 'values')) as n_values,
        struct_extract(declared, 'flag_position') as flag_position,
        struct_extract(declared, 'worse') as worse,
        struct_extract(declared, 'spans') as has_spans

    from dimensions

)

select * from final
