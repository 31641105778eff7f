{#
    Refusal rates per task, model, arm, query set, condition and disability
    group ('neutral'; each disability; 'all' pooling every disability-aware
    prompt), per source: 'any' (at least one source flags the generation), the
    rule set ('rule'), and each judge ('judge:<judge>:rubric',
    'judge:<judge>:contrastive'). A rate is over the generations that source
    assessed; the others are counted (n_not_assessed), never read as "no refusal".

    Built model by model (macro model_scope_plan): a build computes again only the models
    whose generations or pairs changed; any change in the verdicts, or in its reuse key
    (macro reuse_key: its code or that of a model or seed upstream, a var they read, the
    refusal rule set's code) computes every model.
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='sync_all_columns',
        pre_hook="{{ model_scope_reset(['stg_raw__generations', 'int_pair_texts'], verdicts_digest()) }}",
        post_hook="{{ model_scope_record(['stg_raw__generations', 'int_pair_texts'], verdicts_digest()) }}",
    )
}}
{%- set plan = model_scope_plan(['stg_raw__generations', 'int_pair_texts'], verdicts_digest()) %}

with

refusals as (

    {{ model_scope_rows(ref('int_generation_refusals'), plan) }}

),

flags as (

    select * from {{ ref('int_generation_refusal_flags') }}
    {{ model_scope_filter(plan) }}

),

scope_sources as (

    -- a source is reported where it assessed at least one generation of the model and arm
    select distinct
        refusals.task,
        refusals.model_id,
        refusals.arm,
        refusals.query_set,
        flags.source,
        flags.source_kind,
        flags.judge_name

    from flags
    inner join refusals
        on flags.generation_id = refusals.generation_id

),

source_decisions as (

    select
        refusals.*,
        scope_sources.source,
        scope_sources.source_kind,
        scope_sources.judge_name,
        flags.generation_id is not null as source_assessed,
        flags.refused as source_refused

    from refusals
    inner join scope_sources
        on {{ join_keys('refusals', 'scope_sources', ['task', 'model_id', 'arm', 'query_set']) }}
    left join flags
        on refusals.generation_id = flags.generation_id
        and scope_sources.source = flags.source

),

any_decisions as (

    select
        refusals.*,
        'any' as source,
        'any' as source_kind,
        cast(null as varchar) as judge_name,
        refusals.is_assessed as source_assessed,
        refusals.refused as source_refused

    from refusals

),

decisions as (

    select * from source_decisions
    union all
    select * from any_decisions

),

grouped as (

    select
        *,
        {{ disability_group() }} as disability_group
    from decisions
    union all
    select
        *,
        'all' as disability_group
    from decisions
    where condition = 'disability'

),

aggregated as (

    select
        task,
        model_id,
        arm,
        query_set,
        condition,
        disability_group,
        source,
        source_kind,
        judge_name,
        count(*) as n_generations,
        count(case when source_assessed then 1 end) as n_assessed,
        count(case when source_assessed and source_refused then 1 end) as n_refused

    from grouped
    group by task, model_id, arm, query_set, condition, disability_group, source, source_kind, judge_name

),

final as (

    select
        task,
        model_id,
        arm,
        query_set,
        condition,
        disability_group,
        source,
        source_kind,
        judge_name,
        n_generations,
        n_assessed,
        n_refused,
        -- null, not 0, when the source assessed nothing here
        100.0 * cast(n_refused as double) / nullif(n_assessed, 0) as refusal_pct,
        n_generations - n_assessed as n_not_assessed

    from aggregated

)

select * from final
