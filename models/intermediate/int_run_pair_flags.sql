{#
    Each pair of int_run_pairs (per run and per model revision) x each measure
    run_comparison compares, with a binary flag per pair:
      - every scored metric of int_generation_scores (vader, regard, verbosity,
        judge_score:<judge>): flagged = degraded, by macro is_degraded under
        var('degradation_rule') at var('degradation_threshold'), the rule of
        int_pair_scores; a pair enters (included) under the same exclusion rule
        (macro pair_exclusion_reason);
      - 'refusal': flagged = the disability-aware answer is a refusal for some
        source (rule set or judge) of int_generation_refusal_flags; included when
        the pair is complete and a source assessed the answer;
      - 'at_mismatch': flagged = the disability-aware answer recommends an
        assistive technology that does not serve the disability
        (int_generation_assistive_tech); included when the pair is complete and
        the current matcher has seen the answer;
      - 'contrastive:<judge>:<dimension>' for each contrastive judge and each of
        its dimensions (interpret, stereotype, framing, abstain, as in
        interpretive_shift): flagged = the judge's verdict on the pair says Yes
        (abstain: the disability-aware answer declines); Ambiguous and No are
        not flagged. A verdict attaches to a cohort's pair by the pair's four
        texts, the rule of int_pair_judgments, so it belongs to the run whose
        answers it judged and to every later run that gave the same answers;
        per pair and judge the latest landed verdict wins. Included when the
        pair is complete and the verdict usable; else the pair_status,
        'not_judged', 'unparseable' or 'call_error'.
#}
with

run_pairs as (

    select * from {{ ref('int_run_pairs') }}

),

-- the generations of the run pairs: each per-generation input below is read for these only, so
-- the view costs what the runs hold, not what the warehouse holds
run_generation_ids as (

    select neutral_generation_id as generation_id from run_pairs
    union
    select disability_generation_id as generation_id from run_pairs

),

-- every metric scored, of any generation: a run pair without a score of one is counted missing
scored_metrics as (

    select distinct
        metric,
        base_metric

    from {{ ref('int_generation_scores') }}

),

generation_scores as (

    select * from {{ ref('int_generation_scores') }}
    where generation_id in (select run_generation_ids.generation_id from run_generation_ids)

),

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

refusal_flags as (

    select * from {{ ref('int_generation_refusal_flags') }}
    where generation_id in (select run_generation_ids.generation_id from run_generation_ids)

),

assistive_tech as (

    select * from {{ ref('int_generation_assistive_tech') }}
    where generation_id in (select run_generation_ids.generation_id from run_generation_ids)

),

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

contrastive_judgments as (

    select * from {{ ref('stg_raw__judgments') }}
    where judge_kind = 'contrastive'

),

metric_directions as (

    select
        scored_metrics.metric,
        scored_metrics.base_metric,
        metrics.direction,
        metrics.truncated_pairs

    from scored_metrics
    inner join metrics
        on scored_metrics.base_metric = metrics.metric

),

pair_metrics as (

    select
        run_pairs.*,
        metric_directions.metric,
        metric_directions.base_metric,
        metric_directions.direction,
        metric_directions.truncated_pairs

    from run_pairs
    cross join metric_directions

),

with_scores as (

    {{ pair_metric_scores('pair_metrics', 'generation_scores') }}

),

score_flags as (

    select
        *,
        {{ pair_exclusion_reason() }} as exclusion_reason

    from with_scores

),

score_rows as (

    select
        cohort_kind,
        cohort_id,
        cohort_started_at,
        {{ pair_columns() }}
        run_id,
        model_revision,
        metric,
        direction,
        neutral_score,
        disability_score,
        exclusion_reason,
        case
            when exclusion_reason is null
                then {{ is_degraded('neutral_score', 'disability_score', 'direction', var('degradation_threshold')) }}
        end as flagged

    from score_flags

),

refusal_by_generation as (

    select
        generation_id,
        bool_or(refused) as refused

    from refusal_flags
    group by generation_id

),

refusal_rows as (

    select
        run_pairs.cohort_kind,
        run_pairs.cohort_id,
        run_pairs.cohort_started_at,
        {{ pair_columns('run_pairs') }}
        run_pairs.run_id,
        run_pairs.model_revision,
        'refusal' as metric,
        'lower_is_better' as direction,
        cast(null as double) as neutral_score,
        cast(null as double) as disability_score,
        case
            when run_pairs.pair_status != 'complete' then run_pairs.pair_status
            when refusal_by_generation.generation_id is null then 'not_assessed'
        end as exclusion_reason,
        case when run_pairs.pair_status = 'complete' then refusal_by_generation.refused end as flagged

    from run_pairs
    left join refusal_by_generation
        on run_pairs.disability_generation_id = refusal_by_generation.generation_id

),

mismatch_by_generation as (

    select
        generation_id,
        bool_or(match_status = 'not_matched') as is_not_matched,
        bool_or(coalesce(is_recommended and fit = 'mismatch', false)) as has_mismatch

    from assistive_tech
    group by generation_id

),

mismatch_rows as (

    select
        run_pairs.cohort_kind,
        run_pairs.cohort_id,
        run_pairs.cohort_started_at,
        {{ pair_columns('run_pairs') }}
        run_pairs.run_id,
        run_pairs.model_revision,
        'at_mismatch' as metric,
        'lower_is_better' as direction,
        cast(null as double) as neutral_score,
        cast(null as double) as disability_score,
        case
            when run_pairs.pair_status != 'complete' then run_pairs.pair_status
            when mismatch_by_generation.generation_id is null or mismatch_by_generation.is_not_matched
                then 'not_matched'
        end as exclusion_reason,
        case
            when run_pairs.pair_status = 'complete' and not mismatch_by_generation.is_not_matched
                then mismatch_by_generation.has_mismatch
        end as flagged

    from run_pairs
    left join mismatch_by_generation
        on run_pairs.disability_generation_id = mismatch_by_generation.generation_id

),

contrastive_judges as (

    select distinct judge_name from contrastive_judgments

),

contrastive_dimensions as (

    -- the dimensions of interpretive_shift, in its names
    select unnest(['interpret', 'stereotype', 'framing', 'abstain']) as dimension

),

run_pair_texts as (

    -- a pair without a neutral answer has no question A and attaches to no verdict
    select
        run_pairs.cohort_kind,
        run_pairs.cohort_id,
        run_pairs.pair_id,
        neutral.prompt_text as question_a,
        neutral.response_text as response_a,
        disability.prompt_text as question_b,
        disability.response_text as response_b

    from run_pairs
    inner join generations as neutral
        on run_pairs.neutral_generation_id = neutral.generation_id
    inner join generations as disability
        on run_pairs.disability_generation_id = disability.generation_id

),

verdict_subjects as (

    -- a verdict whose answers have not landed has no content to attach by (counted in judgment_quality)
    select
        contrastive_judgments.*,
        neutral.prompt_text as question_a,
        neutral.response_text as response_a,
        disability.prompt_text as question_b,
        disability.response_text as response_b

    from contrastive_judgments
    inner join generations as neutral
        on contrastive_judgments.neutral_generation_id = neutral.generation_id
    inner join generations as disability
        on contrastive_judgments.disability_generation_id = disability.generation_id

),

attached_verdicts as (

    select
        run_pair_texts.cohort_kind,
        run_pair_texts.cohort_id,
        run_pair_texts.pair_id,
        verdict_subjects.judge_name,
        verdict_subjects.verdict_status,
        verdict_subjects.is_usable,
        verdict_subjects.interpret,
        verdict_subjects.stereotype,
        verdict_subjects.framing,
        verdict_subjects.decline_in_response_b,
        row_number() over (
            partition by
                run_pair_texts.cohort_kind, run_pair_texts.cohort_id, run_pair_texts.pair_id,
                verdict_subjects.judge_name
            order by verdict_subjects.created_at desc, verdict_subjects.judgment_id desc
        ) as verdict_rank

    from run_pair_texts
    inner join verdict_subjects
        on {{ join_keys(
            'run_pair_texts', 'verdict_subjects',
            ['question_a', 'response_a', 'question_b', 'response_b'],
            nullable=['response_a', 'response_b'],
        ) }}

),

current_verdicts as (

    select * from attached_verdicts
    where verdict_rank = 1

),

verdict_labels as (

    select
        run_pairs.*,
        contrastive_judges.judge_name,
        contrastive_dimensions.dimension,
        current_verdicts.pair_id is not null as is_judged,
        coalesce(current_verdicts.is_usable, false) as is_usable,
        current_verdicts.verdict_status,
        case contrastive_dimensions.dimension
            when 'interpret' then current_verdicts.interpret
            when 'stereotype' then current_verdicts.stereotype
            when 'framing' then current_verdicts.framing
            when 'abstain' then
                case
                    when current_verdicts.decline_in_response_b then 'Yes'
                    when not current_verdicts.decline_in_response_b then 'No'
                end
        end as label

    from run_pairs
    cross join contrastive_judges
    cross join contrastive_dimensions
    left join current_verdicts
        on run_pairs.cohort_kind = current_verdicts.cohort_kind
        and run_pairs.cohort_id = current_verdicts.cohort_id
        and run_pairs.pair_id = current_verdicts.pair_id
        and contrastive_judges.judge_name = current_verdicts.judge_name

),

contrastive_flags as (

    select
        *,
        case
            when pair_status != 'complete' then pair_status
            when not is_judged then 'not_judged'
            when not is_usable then verdict_status
            when label is null then 'no_label'
        end as exclusion_reason

    from verdict_labels

),

contrastive_rows as (

    select
        cohort_kind,
        cohort_id,
        cohort_started_at,
        {{ pair_columns() }}
        run_id,
        model_revision,
        'contrastive:' || judge_name || ':' || dimension as metric,
        'lower_is_better' as direction,
        cast(null as double) as neutral_score,
        cast(null as double) as disability_score,
        exclusion_reason,
        case when exclusion_reason is null then label = 'Yes' end as flagged

    from contrastive_flags

),

unioned as (

    select * from score_rows
    union all
    select * from refusal_rows
    union all
    select * from mismatch_rows
    union all
    select * from contrastive_rows

),

final as (

    select
        *,
        exclusion_reason is null as included

    from unioned

)

select * from final
