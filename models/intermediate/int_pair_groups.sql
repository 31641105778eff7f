{#
    Every NP/DP pair x every measure, long, with the pair's outcome and the
    identity of the person pictured. A measure is a linguistic metric of
    int_pair_scores (the pair is degraded: AccessEval Eq. 1) or a contrastive
    judge's dimension of int_pair_dimension_labels (interpret, stereotype,
    framing: labelled 'Yes'; abstain: the disability response declines; a
    dimension of a judge's own set: an answer that flags the pair). outcome is 1
    or 0 for a pair that counts (included) and null otherwise, so every rate
    downstream (group_bias, robustness, mitigation_effect) is avg(outcome)
    over included pairs, by the same exclusion rules as degradation and
    interpretive_shift. Identity columns come from raw.images for vision pairs
    (query_set = image_set, query_id = image_id); text pairs have none.
#}
{#- its rows of a model come from that model's rows of each input with a model_id (macro record_group_local_view) -#}
{{ config(post_hook="{{ record_group_local_view() }}") }}
with

pair_scores as (

    select * from {{ ref('int_pair_scores') }}

),

dimension_labels as (

    select * from {{ ref('int_pair_dimension_labels') }}

),

images as (

    select * from {{ ref('stg_raw__images') }}

),

linguistic as (

    select
        {{ pair_columns() }}
        pair_status,
        'linguistic' as measure_kind,
        metric as measure,
        judge_name,
        metric as measure_id,
        included,
        exclusion_reason,
        case when included then (case when degraded then 'degraded' else 'not_degraded' end) end as label,
        case when included then cast(degraded as integer) end as outcome

    from pair_scores

),

judged as (

    select
        {{ pair_columns() }}
        pair_status,
        'judge' as measure_kind,
        dimension as measure,
        judge_name,
        dimension || ':' || judge_name as measure_id,
        included,
        exclusion_reason,
        case when included then label end as label,
        case when included then cast(is_flagged as integer) end as outcome

    from dimension_labels

),

measured as (

    select * from linguistic
    union all
    select * from judged

),

final as (

    select
        measured.*,
        images.image_id is not null as has_identity,
        images.scenario,
        images.gender,
        images.race,
        images.gender_race,
        images.extra_json as identity_json

    from measured
    left join images
        on measured.task = 'vision'
        and measured.query_set = images.image_set
        and measured.query_id = images.image_id

)

select * from final
