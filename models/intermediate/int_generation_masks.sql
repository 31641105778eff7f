{#
    Which mask sets each answer is scored with by the masked scorers: one row per
    generation and disability category it is masked for. A disability-aware
    answer is masked with its own category's set; a neutral answer with the set
    of every category answered in its unit (task, model, arm, query set, query,
    temperature, sample: those it is paired with in int_pairs, and in
    int_run_pairs for any run), so both answers of a pair are masked alike.
    response_scores_masked scores each (text, mask set) here once.
#}
{#- its rows of a model come from that model's rows of each input with a model_id (macro record_group_local_view) -#}
{{ config(post_hook="{{ record_group_local_view() }}") }}
with

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

mask_sets as (

    select * from {{ ref('int_mask_sets') }}

),

answered_categories as (

    select distinct
        {{ pair_unit_keys() | join(',\n        ') }},
        disability_id

    from generations
    where condition = 'disability'

),

own_category as (

    select
        generation_id,
        model_id,
        text_hash,
        disability_id as mask_disability_id

    from generations
    where condition = 'disability'

),

partner_categories as (

    select
        generations.generation_id,
        generations.model_id,
        generations.text_hash,
        answered_categories.disability_id as mask_disability_id

    from generations
    inner join answered_categories
        on {{ join_keys('generations', 'answered_categories', pair_unit_keys(), nullable=['temperature']) }}
    where generations.condition = 'neutral'

),

masked_for as (

    select * from own_category
    union all
    select * from partner_categories

),

final as (

    select
        masked_for.generation_id,
        masked_for.model_id,
        masked_for.text_hash,
        masked_for.mask_disability_id,
        mask_sets.mask_digest

    from masked_for
    inner join mask_sets
        on masked_for.mask_disability_id = mask_sets.disability_id

)

select * from final
