{#
    Did a mitigation help? (VLM paper section 6.1, Table 3; AccessEval's
    assistive-technology guardrail.) For every arm other than the baseline
    (var 'baseline_arm', default 'baseline'), per task, model, query set,
    measure and slice, the rate on the baseline arm and on the mitigation arm
    over the SAME units: a unit (query or image, disability, temperature,
    sample) counts only when it is included in both arms, so the change
    compares like with like. Every measure is a rate of a bad outcome
    (degradation, a 'Yes' label, a declined answer): a lower rate is better,
    so change_pct < 0 is 'improved' and > 0 'regressed'. Slices: overall,
    domain, disability, and for vision pairs gender, race and gender x race.
#}
with

pair_groups as (

    select * from {{ ref('int_pair_groups') }}

),

baseline as (

    select * from pair_groups
    where arm = '{{ var("baseline_arm", "baseline") }}'

),

treated as (

    select * from pair_groups
    where arm != '{{ var("baseline_arm", "baseline") }}'

),

units as (

    select
        treated.task,
        treated.model_id,
        treated.query_set,
        treated.arm,
        treated.measure_kind,
        treated.measure,
        treated.judge_name,
        treated.measure_id,
        treated.query_id,
        treated.domain,
        treated.disability_id,
        treated.gender,
        treated.race,
        treated.gender_race,
        treated.included and coalesce(baseline.included, false) as matched,
        treated.included as arm_included,
        baseline.outcome as baseline_outcome,
        treated.outcome as arm_outcome

    from treated
    left join baseline
        on treated.task = baseline.task
        and treated.model_id = baseline.model_id
        and treated.query_set = baseline.query_set
        and treated.query_id = baseline.query_id
        and treated.disability_id = baseline.disability_id
        and treated.temperature is not distinct from baseline.temperature
        and treated.sample_index = baseline.sample_index
        and treated.measure_id = baseline.measure_id

),

sliced as (

    select *, 'overall' as slice, 'all' as slice_value from units
    union all
    select *, 'domain' as slice, domain as slice_value from units
    union all
    select *, 'disability' as slice, disability_id as slice_value from units
    union all
    select *, 'gender' as slice, gender as slice_value from units where gender is not null
    union all
    select *, 'race' as slice, race as slice_value from units where race is not null
    union all
    select *, 'gender_race' as slice, gender_race as slice_value from units where gender_race is not null

),

aggregated as (

    select
        task,
        model_id,
        query_set,
        arm,
        measure_kind,
        measure,
        judge_name,
        measure_id,
        slice,
        slice_value,
        count(case when matched then 1 end) as n_pairs,
        coalesce(sum(case when matched then baseline_outcome end), 0) as n_outcome_baseline,
        coalesce(sum(case when matched then arm_outcome end), 0) as n_outcome_arm,
        count(case when arm_included and not matched then 1 end) as n_unmatched

    from sliced
    -- measure_kind, measure and judge_name follow from measure_id
    group by task, model_id, query_set, arm, measure_kind, measure, judge_name, measure_id, slice, slice_value

),

rated as (

    select
        *,
        100.0 * n_outcome_baseline / nullif(n_pairs, 0) as baseline_rate_pct,
        100.0 * n_outcome_arm / nullif(n_pairs, 0) as arm_rate_pct

    from aggregated

),

final as (

    select
        task,
        model_id,
        query_set,
        '{{ var("baseline_arm", "baseline") }}' as baseline_arm,
        arm,
        measure_kind,
        measure,
        judge_name,
        measure_id,
        slice,
        slice_value,
        n_pairs,
        n_outcome_baseline,
        n_outcome_arm,
        baseline_rate_pct,
        arm_rate_pct,
        arm_rate_pct - baseline_rate_pct as change_pct,
        case
            when n_pairs = 0 then null
            when arm_rate_pct < baseline_rate_pct then 'improved'
            when arm_rate_pct > baseline_rate_pct then 'regressed'
            else 'unchanged'
        end as direction,
        n_unmatched

    from rated

)

select * from final
