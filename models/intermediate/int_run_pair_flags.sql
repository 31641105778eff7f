{#
    Each pair of int_run_pairs (per run and per model revision) x each measure
    run_comparison compares, with a binary flag per pair:
      - every scored metric of int_generation_scores (vader, regard, verbosity,
        judge_score:<judge>) and of int_generation_masked_scores (vader_masked,
        regard_masked, for the pair's category): flagged = degraded, by macro is_degraded under
        var('degradation_rule') at var('degradation_threshold'), the rule of
        int_pair_scores, or by the scorer's own flag rule where it declares one (a masked
        sentiment parity, macro pair_metric_flag); a pair enters (included) under the same exclusion rule
        (macro pair_exclusion_reason);
      - every pair metric (stg_registry__pair_scorers: a similarity or a sentiment
        parity of the two answers, response_pair_scores): flagged by its own rule and
        threshold (macro pair_metric_flag), the rule of int_pair_scores, under the same
        exclusion rule;
      - 'refusal': flagged = the disability-aware answer is a refusal for some
        source (rule set or judge) of int_generation_refusal_flags; included when
        the pair is complete and a source assessed the answer;
      - 'at_mismatch': flagged = the disability-aware answer recommends an
        assistive technology that does not serve the disability
        (int_generation_assistive_tech); included when the pair is complete and
        the current matcher has seen the answer;
      - 'contrastive:<judge>:<dimension>' for each contrastive judge and each of
        its dimensions (interpret, stereotype, framing, abstain, or those of its
        own dimension set, as in interpretive_shift): flagged = the judge's
        verdict on the pair says Yes (abstain: the disability-aware answer
        declines; a user's dimension: an answer at or past its flag_from,
        int_verdict_dimension_labels.is_flagged); Ambiguous and No are not flagged. A verdict attaches to a cohort's pair by the pair's four
        texts, the rule of int_pair_judgments, so it belongs to the run whose
        answers it judged and to every later run that gave the same answers;
        per pair and judge the latest landed verdict wins. Included when the
        pair is complete and the verdict usable and on a set asking the
        dimension; else the pair_status, 'not_judged', 'unparseable',
        'call_error' or 'not_asked'.
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

    union

    -- the masked scorers' metrics (every pair has a row of each, scored or not)
    select
        metric,
        metric as base_metric

    from {{ ref('stg_registry__scorers') }}
    where score_model = 'response_scores_masked'

),

generation_scores as (

    select * from {{ ref('int_generation_scores') }}
    where generation_id in (select run_generation_ids.generation_id from run_generation_ids)

),

-- the masked scorers' scores, per answer and the category it is masked for
masked_scores as (

    select * from {{ ref('int_generation_masked_scores') }}
    where generation_id in (select run_generation_ids.generation_id from run_generation_ids)

),

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

pair_scorers as (

    select * from {{ ref('stg_registry__pair_scorers') }}

),

-- the text of each generation of the run pairs, for their pair scores
generation_texts as (

    select
        generation_id,
        text_hash
    from {{ ref('stg_raw__generations') }}
    where generation_id in (select run_generation_ids.generation_id from run_generation_ids)

),

pair_values as (

    select * from {{ ref('response_pair_scores') }}

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

verdict_labels as (

    select * from {{ ref('int_verdict_dimension_labels') }}

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

    {{ pair_metric_scores('pair_metrics', 'generation_scores', 'masked_scores') }}

),

score_flags as (

    select
        with_scores.*,
        own_rules.flag_rule,
        own_rules.threshold,
        {{ pair_exclusion_reason() }} as exclusion_reason

    from with_scores
    -- a scorer with a flag rule of its own (a masked sentiment parity), as in int_pair_scores
    left join {{ own_flag_rules() }} as own_rules
        on with_scores.metric = own_rules.metric

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
            when exclusion_reason is not null then null
            when flag_rule is not null
                then {{ pair_metric_flag('flag_rule', 'neutral_score', 'disability_score', 'threshold') }}
            else {{ is_degraded('neutral_score', 'disability_score', 'direction', var('degradation_threshold')) }}
        end as flagged

    from score_flags

),

pair_metric_values as (

    {{ pair_scorer_scores('run_pairs', 'pair_scorers', 'generation_texts', 'pair_values') }}

),

pair_metric_flags as (

    select
        *,
        {{ pair_exclusion_reason() }} as exclusion_reason

    from pair_metric_values

),

pair_metric_rows as (

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
                then {{ pair_metric_flag('degradation_rule', 'neutral_score', 'disability_score', 'threshold') }}
        end as flagged

    from pair_metric_flags

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

judge_dimensions as (

    -- each contrastive judge's dimensions, as in interpretive_shift: those of every set it was asked on
    select distinct
        judge_name,
        dimension

    from verdict_labels

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
        verdict_subjects.judgment_id,
        verdict_subjects.verdict_status,
        verdict_subjects.is_usable,
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

pair_verdict_labels as (

    select
        run_pairs.*,
        judge_dimensions.judge_name,
        judge_dimensions.dimension,
        current_verdicts.pair_id is not null as is_judged,
        coalesce(current_verdicts.is_usable, false) as is_usable,
        current_verdicts.verdict_status,
        verdict_labels.judgment_id is not null as is_asked,
        verdict_labels.label,
        verdict_labels.is_flagged

    from run_pairs
    cross join judge_dimensions
    left join current_verdicts
        on run_pairs.cohort_kind = current_verdicts.cohort_kind
        and run_pairs.cohort_id = current_verdicts.cohort_id
        and run_pairs.pair_id = current_verdicts.pair_id
        and judge_dimensions.judge_name = current_verdicts.judge_name
    left join verdict_labels
        on current_verdicts.judgment_id = verdict_labels.judgment_id
        and judge_dimensions.dimension = verdict_labels.dimension

),

contrastive_flags as (

    select
        *,
        case
            when pair_status != 'complete' then pair_status
            when not is_judged then 'not_judged'
            when not is_usable then verdict_status
            when not is_asked then 'not_asked'
            when is_flagged is null then 'no_label'
        end as exclusion_reason

    from pair_verdict_labels

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
        case when exclusion_reason is null then is_flagged end as flagged

    from contrastive_flags

),

unioned as (

    select * from score_rows
    union all
    select * from pair_metric_rows
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
