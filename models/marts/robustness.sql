{#
    Are the rates stable under sampling? (VLM paper 5.6 and Table 7:
    temperatures 0, 0.5, 1.0 and three runs.) One row per task, model, arm,
    query set, measure, temperature and sample (a "run"): the run's rate, then
    its spread across the samples at that temperature and across every run of
    the measure (mean, sample sd, min, max, range in percentage points). Every
    measure of int_pair_groups: each linguistic metric's degradation rate and
    each contrastive judge's dimension. Text and vision alike.
#}
with

pair_groups as (

    select * from {{ ref('int_pair_groups') }}

),

runs as (

    select
        task,
        model_id,
        arm,
        query_set,
        measure_kind,
        measure,
        judge_name,
        measure_id,
        temperature,
        sample_index,
        count(case when included then 1 end) as n_pairs,
        coalesce(sum(outcome), 0) as n_outcome,
        count(case when not included then 1 end) as n_excluded

    from pair_groups
    -- measure_kind, measure and judge_name follow from measure_id
    group by task, model_id, arm, query_set, measure_kind, measure, judge_name, measure_id, temperature, sample_index

),

rated as (

    select
        *,
        100.0 * n_outcome / nullif(n_pairs, 0) as rate_pct

    from runs

),

final as (

    select
        task,
        model_id,
        arm,
        query_set,
        measure_kind,
        measure,
        judge_name,
        measure_id,
        temperature,
        sample_index,
        n_pairs,
        n_outcome,
        n_excluded,
        rate_pct,
        count(rate_pct) over at_temperature as n_samples_at_temperature,
        avg(rate_pct) over at_temperature as temperature_mean_pct,
        stddev_samp(rate_pct) over at_temperature as temperature_sd_pct,
        max(rate_pct) over at_temperature - min(rate_pct) over at_temperature as temperature_range_pct,
        count(rate_pct) over all_runs as n_runs,
        avg(rate_pct) over all_runs as mean_pct,
        stddev_samp(rate_pct) over all_runs as sd_pct,
        min(rate_pct) over all_runs as min_pct,
        max(rate_pct) over all_runs as max_pct,
        max(rate_pct) over all_runs - min(rate_pct) over all_runs as range_pct

    from rated
    window
        at_temperature as (partition by task, model_id, arm, query_set, measure_id, temperature),
        all_runs as (partition by task, model_id, arm, query_set, measure_id)

)

select * from final
