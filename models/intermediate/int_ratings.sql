{#
    Every rating of an item, long: one row per (item_id, dimension, rater_id),
    from every kind of rater, for the agreement marts.

      human     raw.annotations (rater_id 'human:<annotator_id>')
      judge     the judges' current verdicts (rater_id 'judge:<judge_name>'),
                only usable ones (the call succeeded and the verdict parsed:
                stg_raw__judgments.is_usable):
                  rubric      -> judge_score of a generation (item = generation_id),
                                 from int_generation_judgments
                  contrastive -> every dimension of the judge's set (interpret,
                                 stereotype, framing and abstain, or its own) of a
                                 complete pair (item = int_pairs.pair_id), from
                                 int_pair_dimension_labels; abstain = 'Yes' when the
                                 judge found that response B declines
      detector  the LoRA detectors' labels of a pair (rater_id 'detector:<adapter_id>'),
                from detector_verdicts, only where the detector read the pair
                (status 'scored' or 'truncated'): interpret, stereotype, framing, abstain

    Those models attach each content-addressed verdict to every generation (pair)
    with the same texts and keep the latest verdict per item and judge.

    value is the label or the score as text; value_num the score, or a label's
    position on its scale from the best answer (No = 0, Ambiguous = 1, Yes = 2;
    abstain No = 0, Yes = 1), the same coding as raw.annotations.value_num and
    ableaudit.stats.SCALES (a user's dimension: int_judge_dimensions).
#}

-- read by several marts and data tests: joined once per build, not on every read
{{ config(materialized='table') }}

with

annotations as (

    select * from {{ ref('stg_raw__annotations') }}

),

generation_judgments as (

    select * from {{ ref('int_generation_judgments') }}

),

dimension_labels as (

    select * from {{ ref('int_pair_dimension_labels') }}
    where included

),

detector_verdicts as (

    select * from {{ ref('detector_verdicts') }}
    where status in ('scored', 'truncated')

),

human_ratings as (

    select
        item_id,
        item_kind,
        dimension,
        'human:' || annotator_id as rater_id,
        'human' as rater_kind,
        value,
        value_num,
        annotation_id as source_id

    from annotations

),

judge_scores as (

    select
        generation_id as item_id,
        'generation' as item_kind,
        'judge_score' as dimension,
        'judge:' || judge_name as rater_id,
        'judge' as rater_kind,
        cast(score as varchar) as value,
        cast(score as double) as value_num,
        judgment_id as source_id

    from generation_judgments
    where
        is_usable
        and score is not null

),

judge_labels as (

    -- a label's position from the best answer (No = 0, Ambiguous = 1, Yes = 2; abstain
    -- No = 0, Yes = 1); a scale's answer is its number
    select
        pair_id as item_id,
        'pair' as item_kind,
        dimension,
        'judge:' || judge_name as rater_id,
        'judge' as rater_kind,
        label as value,
        case when answer_kind = 'scale' then cast(label as double) else cast(value_position as double) end as value_num,
        judgment_id as source_id

    from dimension_labels

),

detector_long as (

    select
        pair_id,
        adapter_id,
        'interpret' as dimension,
        interpret as value
    from detector_verdicts
    union all
    select
        pair_id,
        adapter_id,
        'stereotype' as dimension,
        stereotype as value
    from detector_verdicts
    union all
    select
        pair_id,
        adapter_id,
        'framing' as dimension,
        framing as value
    from detector_verdicts
    union all
    select
        pair_id,
        adapter_id,
        'abstain' as dimension,
        abstain as value
    from detector_verdicts

),

detector_labels as (

    select
        pair_id as item_id,
        'pair' as item_kind,
        dimension,
        'detector:' || adapter_id as rater_id,
        'detector' as rater_kind,
        value,
        case
            when dimension = 'abstain' then case value when 'No' then 0.0 when 'Yes' then 1.0 end
            else case value when 'No' then 0.0 when 'Ambiguous' then 1.0 when 'Yes' then 2.0 end
        end as value_num,
        adapter_id as source_id

    from detector_long
    where value is not null

),

final as (

    select * from human_ratings
    union all
    select * from judge_scores
    union all
    select * from judge_labels
    union all
    select * from detector_labels

)

select * from final
