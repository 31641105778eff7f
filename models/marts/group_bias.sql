{#
    The vision paper's group-level analysis (section 5.3, Figure 3): for each
    vision model, arm, temperature and measure (every linguistic metric and
    every contrastive judge's interpret, stereotype, framing and abstain), the
    rate in each group of gender, race and gender x race, the rate over all
    pairs, and delta = group - all in percentage points, with a 95% cluster
    bootstrap CI of the delta (whole images resampled: python model
    int_group_bias_ci). A cell of fewer than var('group_min_pairs') pairs is
    flagged small_cell. Only included pairs of images with known identity count;
    a group whose pairs are all excluded keeps its row, with NULL rate, delta
    and CI and a ci_reason.
#}
with

pair_groups as (

    select * from {{ ref('int_pair_groups') }}
    where task = 'vision' and has_identity

),

bootstrap as (

    select * from {{ ref('int_group_bias_ci') }}

),

grouped as (

    select
        *,
        'gender' as grouping,
        gender as group_value
    from pair_groups
    union all
    select
        *,
        'race' as grouping,
        race as group_value
    from pair_groups
    union all
    select
        *,
        'gender_race' as grouping,
        gender_race as group_value
    from pair_groups

),

overall as (

    select
        task,
        model_id,
        arm,
        query_set,
        temperature,
        measure_id,
        count(case when included then 1 end) as n_pairs_all,
        coalesce(sum(outcome), 0) as n_outcome_all

    from pair_groups
    group by task, model_id, arm, query_set, temperature, measure_id

),

per_group as (

    select
        task,
        model_id,
        arm,
        query_set,
        temperature,
        measure_kind,
        measure,
        judge_name,
        measure_id,
        grouping,
        group_value,
        count(case when included then 1 end) as n_pairs,
        coalesce(sum(outcome), 0) as n_outcome,
        count(distinct case when included then query_id end) as n_images,
        count(case when not included then 1 end) as n_excluded

    from grouped
    -- measure_kind, measure and judge_name follow from measure_id
    group by
        task, model_id, arm, query_set, temperature, measure_kind, measure, judge_name, measure_id,
        grouping, group_value

),

rated as (

    select
        per_group.*,
        overall.n_pairs_all,
        overall.n_outcome_all,
        100.0 * per_group.n_outcome / nullif(per_group.n_pairs, 0) as rate_pct,
        100.0 * overall.n_outcome_all / nullif(overall.n_pairs_all, 0) as rate_all_pct

    from per_group
    inner join overall
        on {{ join_keys(
            'per_group', 'overall',
            ['task', 'model_id', 'arm', 'query_set', 'temperature', 'measure_id'],
            nullable=['temperature'],
        ) }}

),

final as (

    select
        rated.task,
        rated.model_id,
        rated.arm,
        rated.query_set,
        rated.temperature,
        rated.measure_kind,
        rated.measure,
        rated.judge_name,
        rated.measure_id,
        rated.grouping,
        rated.group_value,
        rated.n_pairs,
        rated.n_outcome,
        rated.n_images,
        rated.n_excluded,
        rated.rate_pct,
        rated.n_pairs_all,
        rated.n_outcome_all,
        rated.rate_all_pct,
        rated.rate_pct - rated.rate_all_pct as delta_pct,
        bootstrap.ci_low_pct,
        bootstrap.ci_high_pct,
        bootstrap.n_boot,
        case
            when bootstrap.ci_reason is not null then bootstrap.ci_reason
            when rated.n_pairs = 0 then 'n_pairs=0: no included pair in the group, so no rate, delta or CI'
            when bootstrap.ci_low_pct is null then 'no bootstrap CI for the group'
        end as ci_reason,
        rated.n_pairs < {{ var('group_min_pairs', 30) }} as small_cell

    from rated
    left join bootstrap
        on {{ join_keys(
            'rated', 'bootstrap',
            ['task', 'model_id', 'arm', 'query_set', 'temperature', 'measure_id', 'grouping', 'group_value'],
            nullable=['temperature'],
        ) }}

)

select * from final
