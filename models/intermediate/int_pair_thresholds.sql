{#
    Each pair x metric of int_pair_scores x each threshold of
    var('sensitivity_thresholds'), with the pair's degradation flag at that
    threshold from macro is_degraded (the same rule, var degradation_rule, as
    every other degradation figure) and the mirror flag: improved when the pair
    is degraded under the opposite direction and not degraded under its own
    (under 'paper_literal' a tie with a neutral score <= 0 satisfies both, and
    counts as degraded). Both flags are null for a pair that is not included.
    threshold_sensitivity only counts these flags. The metrics of Eq. 1 only: a pair
    metric (a similarity, a sentiment parity) is flagged by its own rule and threshold
    (var pair_metric_thresholds), not by a share of the neutral score.
#}
{#- its rows of a model come from that model's rows of each input with a model_id (macro record_group_local_view) -#}
{{ config(post_hook="{{ record_group_local_view() }}") }}
{%- set levels = sensitivity_thresholds() %}
with

pair_scores as (

    select * from {{ ref('int_pair_scores') }}
    -- the rows under the rule of Eq. 1 (a pair metric's rows carry its own rule)
    where degradation_rule = '{{ degradation_rule() }}'

),

thresholds as (

    select cast(unnest([{{ levels | join(', ') }}]) as double) as threshold

),

crossed as (

    select
        {{ pair_columns('pair_scores') }}
        pair_scores.metric,
        pair_scores.direction,
        pair_scores.neutral_score,
        pair_scores.disability_score,
        pair_scores.included,
        pair_scores.exclusion_reason,
        pair_scores.degradation_rule,
        thresholds.threshold,
        case pair_scores.direction
            when 'higher_is_better' then 'lower_is_better'
            when 'lower_is_better' then 'higher_is_better'
        end as mirrored_direction

    from pair_scores
    cross join thresholds

),

flagged as (

    select
        *,
        case
            when included then {{ is_degraded('neutral_score', 'disability_score', 'direction', 'threshold') }}
        end as degraded,
        case
            when included then {{ is_degraded('neutral_score', 'disability_score', 'mirrored_direction', 'threshold') }}
        end as degraded_if_mirrored

    from crossed

),

final as (

    select
        {{ pair_columns() }}
        metric,
        direction,
        neutral_score,
        disability_score,
        included,
        exclusion_reason,
        degradation_rule,
        threshold,
        degraded,
        degraded_if_mirrored and not degraded as improved

    from flagged

)

select * from final
