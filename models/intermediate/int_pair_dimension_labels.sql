{#
    Every NQ-DQ pair x every contrastive judge x every dimension that judge was asked
    (under any of its dimension sets), with the judge's current verdict's answer
    (int_pair_judgments, int_verdict_dimension_labels) and the rule for entering
    interpretive_shift: the pair counts (included) when int_pair_judgments includes it and
    the set of its verdict asks the dimension; otherwise exclusion_reason is
    int_pair_judgments' reason, or 'not_asked' (the judge's current verdict on the pair is
    on a set without the dimension). An excluded pair carries no answer.
#}

-- read by interpretive_shift, int_ratings and int_pair_groups: joined once per build
{{ config(materialized='table') }}

with

pair_judgments as (

    select * from {{ ref('int_pair_judgments') }}

),

verdict_labels as (

    select * from {{ ref('int_verdict_dimension_labels') }}

),

judge_dimensions as (

    select
        judge_name,
        dimension,
        min(dimension_position) as dimension_position

    from verdict_labels
    group by judge_name, dimension

),

pair_dimensions as (

    select
        pair_judgments.*,
        judge_dimensions.dimension,
        judge_dimensions.dimension_position

    from pair_judgments
    inner join judge_dimensions
        on pair_judgments.judge_name = judge_dimensions.judge_name

),

answered as (

    select
        pair_dimensions.*,
        verdict_labels.judgment_id is not null as is_asked,
        verdict_labels.dimension_set,
        verdict_labels.answer_kind,
        verdict_labels.label,
        verdict_labels.value_position,
        verdict_labels.is_flagged

    from pair_dimensions
    left join verdict_labels
        on pair_dimensions.judgment_id = verdict_labels.judgment_id
        and pair_dimensions.dimension = verdict_labels.dimension

),

ruled as (

    select
        *,
        case
            when exclusion_reason is not null then exclusion_reason
            when not is_asked then 'not_asked'
            when value_position is null then 'no_label'
        end as dimension_exclusion_reason

    from answered

),

final as (

    select
        {{ pair_columns() }}
        neutral_generation_id,
        disability_generation_id,
        pair_status,
        run_id,
        judge_name,
        judgment_id,
        prompt_version,
        dimension_set,
        dimension,
        dimension_position,
        answer_kind,
        dimension_exclusion_reason is null as included,
        dimension_exclusion_reason as exclusion_reason,
        -- answers only for pairs that count: an excluded pair never carries a "No"
        case when dimension_exclusion_reason is null then label end as label,
        case when dimension_exclusion_reason is null then value_position end as value_position,
        case when dimension_exclusion_reason is null then is_flagged end as is_flagged

    from ruled

)

select * from final
