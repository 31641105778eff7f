{#
    Did a mitigation help? (VLM paper section 6.1, Table 3 and section 6.2;
    AccessEval's assistive-technology guardrail.) For every arm other than the
    baseline (var 'baseline_arm', default 'baseline'), per task, model, query
    set, measure and slice, the rate on the baseline arm and on the mitigation
    arm over the same units (query or image, disability, temperature, sample).
    Every measure is a rate of a bad outcome (degradation, a 'Yes' label, a
    declined answer): a lower rate is better, so change_pct < 0 is 'improved'
    and > 0 'regressed'. Slices: overall, domain, disability, and for vision
    pairs gender, race and gender x race.

    scope says which units count:
      vs_baseline  units included in the baseline and in this arm;
      all_arms     units included in the baseline and in EVERY mitigation arm
                   of the task, model and query set, so prompt mitigation and
                   DPO (and any other arm) are rated on identical pairs;
      dpo_heldout  all_arms units of queries in the DPO held-out split (the
                   preference_split macro, as in preference_pairs): pairs a DPO
                   adapter never trained on. Only where some arm of the model
                   runs a registered DPO adapter (raw.adapters kind 'dpo').
      dpo_unseen   all_arms units of images whose digest (raw.images sha256) is
                   in the training data of none of the model's DPO arms'
                   adapters (data_snapshot.image_digests): the test images never
                   appeared in training, whatever their name or image set, as
                   when DPO trains on COCO and is tested on PAIRS. Vision only,
                   where every DPO adapter of the model recorded its images.
    arm_kind: 'dpo' (the arm runs a registered DPO adapter), 'adapter' (another
    adapter than the baseline's), else 'prompt' (a system prompt mitigation).
#}
{%- set baseline_arm = var("baseline_arm", "baseline") %}
with

pair_groups as (

    select * from {{ ref('int_pair_groups') }}

),

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

images as (

    select * from {{ ref('stg_raw__images') }}

),

registered_dpo as (

    select
        adapter_id,
        path,
        json_extract(data_snapshot, '$.image_digests') as image_digests
    from {{ source('raw', 'adapters') }}
    where kind = 'dpo'

),

arm_adapters as (

    -- the adapter(s) each arm ran with, as written in the audit config
    select
        task,
        model_id,
        query_set,
        arm,
        string_agg(distinct adapter, ', ' order by adapter) as arm_adapter

    from generations
    group by task, model_id, query_set, arm

),

dpo_arm_adapters as (

    -- arms whose adapter is a registered DPO adapter: by its path, its id, or a folder named after its id
    select
        arms.task,
        arms.model_id,
        arms.query_set,
        arms.arm,
        registered_dpo.image_digests

    from arm_adapters as arms
    inner join registered_dpo
        on arms.arm_adapter = registered_dpo.path
        or arms.arm_adapter = registered_dpo.adapter_id
        or rtrim(arms.arm_adapter, '/') like ('%/' || registered_dpo.adapter_id)

),

dpo_arms as (

    select distinct
        task,
        model_id,
        query_set,
        arm
    from dpo_arm_adapters

),

unseen_scoped as (

    -- vision sets whose every DPO adapter recorded the digests of the images it trained on
    select
        task,
        model_id,
        query_set
    from dpo_arm_adapters
    where task = 'vision'
    group by task, model_id, query_set
    having bool_and(image_digests is not null)

),

trained_images as (

    select distinct
        task,
        model_id,
        query_set,
        unnest(from_json(image_digests, '["VARCHAR"]')) as image_sha256
    from dpo_arm_adapters
    where image_digests is not null

),

arm_kinds as (

    select
        arms.task,
        arms.model_id,
        arms.query_set,
        arms.arm,
        arms.arm_adapter,
        case
            when arms.arm = '{{ baseline_arm }}' then 'baseline'
            when dpo_arms.arm is not null then 'dpo'
            when coalesce(arms.arm_adapter, '') != coalesce(base.arm_adapter, '') then 'adapter'
            else 'prompt'
        end as arm_kind

    from arm_adapters as arms
    left join dpo_arms
        on {{ join_keys('arms', 'dpo_arms', ['task', 'model_id', 'query_set', 'arm']) }}
    left join arm_adapters as base
        on arms.task = base.task
        and arms.model_id = base.model_id
        and arms.query_set = base.query_set
        and base.arm = '{{ baseline_arm }}'

),

baseline as (

    select * from pair_groups
    where arm = '{{ baseline_arm }}'

),

treated as (

    select * from pair_groups
    where arm != '{{ baseline_arm }}'

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
        treated.temperature,
        treated.sample_index,
        treated.gender,
        treated.race,
        treated.gender_race,
        treated.included and coalesce(baseline.included, false) as matched,
        treated.included as arm_included,
        baseline.outcome as baseline_outcome,
        treated.outcome as arm_outcome

    from treated
    left join baseline
        on {{ join_keys(
            'treated', 'baseline',
            ['task', 'model_id', 'query_set', 'query_id', 'disability_id', 'temperature', 'sample_index', 'measure_id'],
            nullable=['temperature'],
        ) }}

),

arms_per_measure as (

    select
        task,
        model_id,
        query_set,
        measure_id,
        count(distinct arm) as n_arms
    from treated
    group by task, model_id, query_set, measure_id

),

unit_coverage as (

    -- in how many mitigation arms a unit is included alongside the baseline
    select
        task,
        model_id,
        query_set,
        measure_id,
        query_id,
        disability_id,
        temperature,
        sample_index,
        count(distinct case when matched then arm end) as n_arms_matched

    from units
    group by task, model_id, query_set, measure_id, query_id, disability_id, temperature, sample_index

),

has_dpo as (

    select
        task,
        model_id,
        query_set
    from arm_kinds
    where arm_kind = 'dpo'
    group by task, model_id, query_set

),

covered as (

    select
        units.*,
        unit_coverage.n_arms_matched = arms_per_measure.n_arms as in_all_arms,
        {{ preference_split('units.query_set', 'units.query_id') }} = 'heldout' as in_dpo_heldout,
        has_dpo.task is not null as model_has_dpo,
        unseen_scoped.task is not null as model_has_unseen_scope,
        images.image_sha256 is not null and trained_images.image_sha256 is null as image_unseen

    from units
    inner join arms_per_measure
        on {{ join_keys('units', 'arms_per_measure', ['task', 'model_id', 'query_set', 'measure_id']) }}
    inner join unit_coverage
        on {{ join_keys(
            'units', 'unit_coverage',
            ['task', 'model_id', 'query_set', 'measure_id', 'query_id', 'disability_id', 'temperature', 'sample_index'],
            nullable=['temperature'],
        ) }}
    left join has_dpo
        on units.task = has_dpo.task
        and units.model_id = has_dpo.model_id
        and units.query_set = has_dpo.query_set
    left join unseen_scoped
        on units.task = unseen_scoped.task
        and units.model_id = unseen_scoped.model_id
        and units.query_set = unseen_scoped.query_set
    left join images
        on units.task = 'vision'
        and units.query_set = images.image_set
        and units.query_id = images.image_id
    left join trained_images
        on units.task = trained_images.task
        and units.model_id = trained_images.model_id
        and units.query_set = trained_images.query_set
        and images.image_sha256 = trained_images.image_sha256

),

scoped as (

    select
        *,
        'vs_baseline' as scope,
        matched as in_scope,
        arm_included and not matched as unmatched
    from covered
    union all
    select
        *,
        'all_arms' as scope,
        in_all_arms as in_scope,
        arm_included and not in_all_arms as unmatched
    from covered
    union all
    select
        *,
        'dpo_heldout' as scope,
        in_all_arms and in_dpo_heldout as in_scope,
        arm_included and in_dpo_heldout and not in_all_arms as unmatched
    from covered
    where model_has_dpo
    union all
    select
        *,
        'dpo_unseen' as scope,
        in_all_arms and image_unseen as in_scope,
        -- a unit of an image some DPO adapter trained on counts here, out of scope
        arm_included and not (in_all_arms and image_unseen) as unmatched
    from covered
    where model_has_unseen_scope

),

sliced as (

    select
        *,
        'overall' as slice,
        'all' as slice_value
    from scoped
    union all
    select
        *,
        'domain' as slice,
        domain as slice_value
    from scoped
    union all
    select
        *,
        'disability' as slice,
        disability_id as slice_value
    from scoped
    union all
    select
        *,
        'gender' as slice,
        gender as slice_value
    from scoped
    where gender is not null
    union all
    select
        *,
        'race' as slice,
        race as slice_value
    from scoped
    where race is not null
    union all
    select
        *,
        'gender_race' as slice,
        gender_race as slice_value
    from scoped
    where gender_race is not null

),

aggregated as (

    select
        task,
        model_id,
        query_set,
        arm,
        scope,
        measure_kind,
        measure,
        judge_name,
        measure_id,
        slice,
        slice_value,
        count(case when in_scope then 1 end) as n_pairs,
        coalesce(sum(case when in_scope then baseline_outcome end), 0) as n_outcome_baseline,
        coalesce(sum(case when in_scope then arm_outcome end), 0) as n_outcome_arm,
        count(case when unmatched then 1 end) as n_unmatched

    from sliced
    -- measure_kind, measure and judge_name follow from measure_id
    group by task, model_id, query_set, arm, scope, measure_kind, measure, judge_name, measure_id, slice, slice_value

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
        rated.task,
        rated.model_id,
        rated.query_set,
        '{{ baseline_arm }}' as baseline_arm,
        rated.arm,
        coalesce(arm_kinds.arm_kind, 'prompt') as arm_kind,
        arm_kinds.arm_adapter,
        rated.scope,
        rated.measure_kind,
        rated.measure,
        rated.judge_name,
        rated.measure_id,
        rated.slice,
        rated.slice_value,
        rated.n_pairs,
        rated.n_outcome_baseline,
        rated.n_outcome_arm,
        rated.baseline_rate_pct,
        rated.arm_rate_pct,
        rated.arm_rate_pct - rated.baseline_rate_pct as change_pct,
        case
            when rated.n_pairs = 0 then null
            when rated.arm_rate_pct < rated.baseline_rate_pct then 'improved'
            when rated.arm_rate_pct > rated.baseline_rate_pct then 'regressed'
            else 'unchanged'
        end as direction,
        rated.n_unmatched

    from rated
    left join arm_kinds
        on {{ join_keys('rated', 'arm_kinds', ['task', 'model_id', 'query_set', 'arm']) }}

)

select * from final
