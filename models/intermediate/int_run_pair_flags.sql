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
        the current matcher has seen the answer.
#}
with

run_pairs as (

    select * from {{ ref('int_run_pairs') }}

),

generation_scores as (

    select * from {{ ref('int_generation_scores') }}

),

metrics as (

    select * from {{ ref('stg_seeds__metrics') }}

),

refusal_flags as (

    select * from {{ ref('int_generation_refusal_flags') }}

),

assistive_tech as (

    select * from {{ ref('int_generation_assistive_tech') }}

),

metric_directions as (

    select distinct
        generation_scores.metric,
        generation_scores.base_metric,
        metrics.direction,
        metrics.truncated_pairs

    from generation_scores
    inner join metrics
        on generation_scores.base_metric = metrics.metric

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

unioned as (

    select * from score_rows
    union all
    select * from refusal_rows
    union all
    select * from mismatch_rows

),

final as (

    select
        *,
        exclusion_reason is null as included

    from unioned

)

select * from final
