{#
    The DPO train / held-out split of every audited query (image), computed
    here once with the preference_split macro at var('preference_heldout_share').
    preference_pairs takes its split from this model, and the preference export
    reads the held-out queries and the share from it: Python never recomputes
    the split.
#}
with

pairs as (

    select * from {{ ref('int_pairs') }}

),

queries as (

    select distinct
        task,
        model_id,
        query_set,
        query_id

    from pairs

),

final as (

    select
        task,
        model_id,
        query_set,
        query_id,
        {{ preference_split_group('query_set', 'query_id') }} as split_group,
        {{ preference_split('query_set', 'query_id') }} as split,
        cast({{ preference_heldout_share() }} as double) as heldout_share

    from queries

)

select * from final
