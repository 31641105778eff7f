{#
    Every refusal decision about a generation, long: one row per generation
    (status 'ok') and source that assessed it.

    - 'rule': the rule set (response_refusals, current RULESET_VERSION);
    - 'judge:<judge_name>:rubric': a rubric judge's usable verdict ($.declined);
    - 'judge:<judge_name>:contrastive': a contrastive judge's usable verdicts on
      the pairs the generation is in: decline_in_response_a for the neutral
      side, decline_in_response_b for the disability-aware side. A neutral
      generation is in one pair per disability; it is a refusal for that judge
      when any of those verdicts says so (n_verdicts counts them).

    Unparseable verdicts and failed calls assess nothing (stg_raw__judgments.is_usable).
#}
{#- its rows of a model come from that model's rows of each input with a model_id (macro record_group_local_view) -#}
{{ config(post_hook="{{ record_group_local_view() }}") }}
with

generations as (

    select * from {{ ref('stg_raw__generations') }}
    where status = 'ok'

),

rule_checks as (

    select * from {{ ref('response_refusals') }}
    where scorer_version = {{ current_scorer_version('refusal') }}

),

generation_judgments as (

    select * from {{ ref('int_generation_judgments') }}
    where is_usable

),

pair_judgments as (

    select * from {{ ref('int_pair_judgments') }}
    where included

),

rule_flags as (

    select
        generations.generation_id,
        generations.model_id,
        'rule' as source,
        'rule' as source_kind,
        cast(null as varchar) as judge_name,
        rule_checks.is_refusal as refused,
        rule_checks.refusal_rule,
        1 as n_verdicts

    from generations
    inner join rule_checks
        on generations.text_hash = rule_checks.text_hash

),

rubric_flags as (

    select
        generations.generation_id,
        generations.model_id,
        'judge:' || generation_judgments.judge_name || ':rubric' as source,
        'judge_rubric' as source_kind,
        generation_judgments.judge_name,
        generation_judgments.declined as refused,
        cast(null as varchar) as refusal_rule,
        1 as n_verdicts

    from generations
    inner join generation_judgments
        on generations.generation_id = generation_judgments.generation_id

),

contrastive_sides as (

    select
        neutral_generation_id as generation_id,
        judge_name,
        decline_in_response_a as declined

    from pair_judgments
    union all
    select
        disability_generation_id as generation_id,
        judge_name,
        decline_in_response_b as declined

    from pair_judgments

),

contrastive_flags as (

    select
        generations.generation_id,
        generations.model_id,
        'judge:' || contrastive_sides.judge_name || ':contrastive' as source,
        'judge_contrastive' as source_kind,
        contrastive_sides.judge_name,
        bool_or(contrastive_sides.declined) as refused,
        cast(null as varchar) as refusal_rule,
        count(*) as n_verdicts

    from generations
    inner join contrastive_sides
        on generations.generation_id = contrastive_sides.generation_id
    group by generations.generation_id, generations.model_id, contrastive_sides.judge_name

),

final as (

    select * from rule_flags
    union all
    select * from rubric_flags
    union all
    select * from contrastive_flags

)

select * from final
