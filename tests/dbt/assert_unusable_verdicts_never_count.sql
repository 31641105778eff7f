-- An unparseable verdict or a failed judge call is never a score, a label or
-- a refusal flag: every judge score, every included pair and every judge
-- refusal decision rests on a usable verdict.
with

judgments as (

    select * from {{ ref('stg_raw__judgments') }}

),

generation_scores as (

    select * from {{ ref('int_generation_scores') }}

),

pair_judgments as (

    select * from {{ ref('int_pair_judgments') }}

),

scores_from_unusable as (

    select
        'int_generation_scores' as model,
        generation_scores.generation_id as subject_id,
        generation_scores.judgment_id

    from generation_scores
    inner join judgments
        on generation_scores.judgment_id = judgments.judgment_id
    where
        generation_scores.score is not null
        and not judgments.is_usable

),

pairs_from_unusable as (

    select
        'int_pair_judgments' as model,
        pair_judgments.pair_id as subject_id,
        pair_judgments.judgment_id

    from pair_judgments
    inner join judgments
        on pair_judgments.judgment_id = judgments.judgment_id
    where
        (pair_judgments.included or pair_judgments.interpret is not null)
        and not judgments.is_usable

),

final as (

    select * from scores_from_unusable
    union all
    select * from pairs_from_unusable

)

select * from final
