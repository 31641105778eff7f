{#
    Every answer x mask set it is masked with (int_generation_masks) x masked
    scorer, long: one row per (generation_id, mask_disability_id, metric), the
    masked score under the scorer's current version, and a status for a missing
    one ('no_text', 'not_scored'; else the scorer's: 'ok', 'truncated',
    'unavailable', 'error'). A pair takes the rows of its two answers for its own
    category (macro pair_metric_scores), as int_generation_scores gives the
    unmasked metrics: a neutral answer has one masked score per category.
#}
{#- its rows of a model come from that model's rows of each input with a model_id (macro record_group_local_view) -#}
{{ config(post_hook="{{ record_group_local_view() }}") }}
with

generation_masks as (

    select * from {{ ref('int_generation_masks') }}

),

masked_scorers as (

    select * from {{ ref('stg_registry__scorers') }}
    where score_model = 'response_scores_masked'

),

masked_scores as (

    select * from {{ ref('response_scores_masked') }}

),

final as (

    select
        generation_masks.generation_id,
        generation_masks.model_id,
        generation_masks.text_hash,
        generation_masks.mask_disability_id,
        generation_masks.mask_digest,
        masked_scorers.metric,
        masked_scores.score,
        case
            when generation_masks.text_hash is null then 'no_text'
            when masked_scores.text_hash is null then 'not_scored'
            else masked_scores.status
        end as score_status,
        masked_scores.reason as score_reason,
        masked_scores.scorer_version

    from generation_masks
    cross join masked_scorers
    left join masked_scores
        on generation_masks.text_hash = masked_scores.text_hash
        and generation_masks.mask_digest = masked_scores.mask_digest
        and masked_scorers.scorer = masked_scores.scorer
        and masked_scorers.scorer_version = masked_scores.scorer_version

)

select * from final
