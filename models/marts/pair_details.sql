{#
    The answers behind every rate: one row per pair of int_pairs (a
    disability-aware generation and its neutral generation), wide. Both prompts
    and responses, how each answer ended, every per-text score on both sides,
    the per-metric delta (disability-aware minus neutral), whether the pair
    counts in the metric's rate and, if not, why (int_pair_scores), whether it
    is degraded, both sides' refusal flags, and the pair's judge results.

    The text metrics (vader, regard, verbosity, and every metric of a scorer in
    response_scores_text or response_scores_masked, from the registry: the masked
    scores are those of the pair's category) and the pair metrics (a similarity or a
    sentiment parity of the two answers, stg_registry__pair_scorers: a similarity's
    neutral column is its value for an answer against itself, its disability column the
    pair's similarity; each with its threshold) are columns of their own; a metric
    added otherwise needs its columns here (the dbt test
    assert_pair_details_has_every_text_metric fails until it has them). Judges
    are named by the audit, so each kind is summed up in counts and listed in
    full, one JSON object per judge, in a text column.

    A table built incrementally (docs/incremental.md), as int_pair_scores is: a
    build computes again only the pairs of units that generations of new landings
    answer, and of units with a text whose score or refusal verdict changed since
    the last build; any change in the verdicts or the pair scorers' versions and thresholds
    (macro pair_scorer_versions), or in its reuse key (macro reuse_key: its
    code or that of a model or seed upstream, a var they read, a macro, a scorer's code, a
    library) rebuilds it in full.
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='delete+insert',
        unique_key='pair_id',
        on_schema_change='sync_all_columns',
        pre_hook="{{ incremental_reset(verdicts_digest() + pair_scorer_versions(), 'int_pair_scores') }}",
        post_hook=["{{ pair_details_record() }}", "{{ record_group_fingerprints() }}"],
    )
}}
{%- set pair_metrics = registered_pair_scorers() | map(attribute='metric') | list %}
{%- set text_metrics = ['vader', 'regard', 'verbosity']
    + (registered_scorers('response_scores_text') | selectattr('metric') | map(attribute='metric') | list)
    + (registered_scorers('response_scores_masked') | selectattr('metric') | map(attribute='metric') | list)
    + pair_metrics %}
{%- set plan = incremental_plan(verdicts_digest() + pair_scorer_versions(), 'int_pair_scores') %}
{#- on an incremental build, what is read of a relation keyed by pair (generation) -#}
{%- set scoped_pairs = '' if plan.full else 'where pair_id in (select pair_id from pair_texts)' %}
{%- set changed_texts = none if plan.full else 'text_hash in (' ~ changed_score_texts_sql(
    'dbt_state.pair_detail_texts', detail_texts_sql()) ~ ')' %}
{%- set scoped_generations = scoped_to_pair_generations('pair_texts', plan) %}
{#- the models of those pairs: int_generation_refusals is read model by model (macro
    rows_of_models), so the filter reaches the scans under its aggregate of flags -#}
{%- set models = touched_models(built_relation('stg_raw__generations'), plan, also=changed_texts) %}

with

all_pair_texts as (

    select * from {{ ref('int_pair_texts') }}

),

pair_texts as (

    {#- incremental: the units of new landings, and of texts whose scores or refusal verdict
        changed since the last build #}
    {{ incremental_scope(
        'all_pair_texts',
        none if plan.full else built_relation('stg_raw__generations'),
        plan,
        also=changed_texts,
    ) }}

),

pairs as (

    select * from {{ ref('int_pairs') }}
    {{ scoped_pairs }}

),

generations as (

    select * from {{ ref('stg_raw__generations') }}
    {{ scoped_generations }}

),

pair_scores as (

    select * from {{ ref('int_pair_scores') }}
    {{ scoped_pairs }}

),

pair_judgments as (

    select * from {{ ref('int_pair_judgments') }}
    {{ scoped_pairs }}

),

refusals as (

    {{ rows_of_models(ref('int_generation_refusals'), models, scoped_generations) }}

),

text_scores as (

    -- one row per pair: each text metric's scores, rule and verdict side by side
    select
        pair_id,
        {%- for m in text_metrics %}
            any_value(neutral_score) filter (where metric = '{{ m }}') as neutral_{{ m }},
            any_value(disability_score) filter (where metric = '{{ m }}') as disability_{{ m }},
            any_value(included) filter (where metric = '{{ m }}') as {{ m }}_included,
            any_value(exclusion_reason) filter (where metric = '{{ m }}') as {{ m }}_exclusion_reason,
            any_value(degraded) filter (where metric = '{{ m }}') as {{ m }}_degraded,
        {%- endfor %}
        {%- for m in pair_metrics %}
            any_value(threshold) filter (where metric = '{{ m }}') as {{ m }}_threshold,
        {%- endfor %}
        -- the rule and threshold of the per-text metrics (a pair metric has its own, above)
        {%- set pair_metric_list = sql_literals(pair_metrics) or "''" %}
        any_value(threshold) filter (where metric not in ({{ pair_metric_list }})) as threshold,
        any_value(degradation_rule) filter (
            where metric not in ({{ pair_metric_list }})
        ) as degradation_rule

    from pair_scores
    where judge_name is null
    group by pair_id

),

rubric_judges as (

    select
        pair_id,
        count(*) as n_rubric_judges,
        count(case when included then 1 end) as n_rubric_judges_included,
        count(case when degraded then 1 end) as n_rubric_judges_degraded,
        cast(to_json(list(
            json_object(
                'judge_name', judge_name,
                'neutral_score', neutral_score,
                'disability_score', disability_score,
                'delta', disability_score - neutral_score,
                'included', included,
                'exclusion_reason', exclusion_reason,
                'degraded', degraded
            ) order by judge_name
        )) as varchar) as rubric_judge_scores

    from pair_scores
    where judge_name is not null
    group by pair_id

),

contrastive_judges as (

    select
        pair_id,
        count(*) as n_contrastive_judges,
        count(case when included then 1 end) as n_contrastive_judges_included,
        count(case when interpret = 'Yes' then 1 end) as n_contrastive_interpret_yes,
        count(case when stereotype = 'Yes' then 1 end) as n_contrastive_stereotype_yes,
        count(case when framing = 'Yes' then 1 end) as n_contrastive_framing_yes,
        count(case when decline_in_response_b then 1 end) as n_contrastive_abstain_yes,
        cast(to_json(list(
            json_object(
                'judge_name', judge_name,
                'judgment_id', judgment_id,
                'verdict_status', verdict_status,
                'included', included,
                'exclusion_reason', exclusion_reason,
                'interpret', interpret,
                'stereotype', stereotype,
                'framing', framing,
                'decline_in_response_a', decline_in_response_a,
                'decline_in_response_b', decline_in_response_b
            ) order by judge_name
        )) as varchar) as contrastive_verdicts

    from pair_judgments
    group by pair_id

),

joined as (

    select
        pair_texts.*,
        pairs.neutral_finish_reason,
        pairs.disability_finish_reason,
        pairs.truncated,
        neutral.prompt_id as neutral_prompt_id,
        disability.prompt_id as disability_prompt_id,
        neutral.max_new_tokens as neutral_max_new_tokens,
        disability.max_new_tokens as disability_max_new_tokens,
        neutral.completion_tokens as neutral_completion_tokens,
        disability.completion_tokens as disability_completion_tokens,
        {%- for m in text_metrics %}
            text_scores.neutral_{{ m }},
            text_scores.disability_{{ m }},
            text_scores.{{ m }}_included,
            text_scores.{{ m }}_exclusion_reason,
            text_scores.{{ m }}_degraded,
        {%- endfor %}
        {%- for m in pair_metrics %}
            text_scores.{{ m }}_threshold,
        {%- endfor %}
        text_scores.threshold,
        text_scores.degradation_rule,
        neutral_refusals.refused as neutral_refused,
        neutral_refusals.refusal_source as neutral_refusal_source,
        disability_refusals.refused as disability_refused,
        disability_refusals.refusal_source as disability_refusal_source,
        coalesce(rubric_judges.n_rubric_judges, 0) as n_rubric_judges,
        coalesce(rubric_judges.n_rubric_judges_included, 0) as n_rubric_judges_included,
        coalesce(rubric_judges.n_rubric_judges_degraded, 0) as n_rubric_judges_degraded,
        rubric_judges.rubric_judge_scores,
        coalesce(contrastive_judges.n_contrastive_judges, 0) as n_contrastive_judges,
        coalesce(contrastive_judges.n_contrastive_judges_included, 0) as n_contrastive_judges_included,
        coalesce(contrastive_judges.n_contrastive_interpret_yes, 0) as n_contrastive_interpret_yes,
        coalesce(contrastive_judges.n_contrastive_stereotype_yes, 0) as n_contrastive_stereotype_yes,
        coalesce(contrastive_judges.n_contrastive_framing_yes, 0) as n_contrastive_framing_yes,
        coalesce(contrastive_judges.n_contrastive_abstain_yes, 0) as n_contrastive_abstain_yes,
        contrastive_judges.contrastive_verdicts

    from pair_texts
    inner join pairs
        on pair_texts.pair_id = pairs.pair_id
    left join generations as neutral
        on pair_texts.neutral_generation_id = neutral.generation_id
    left join generations as disability
        on pair_texts.disability_generation_id = disability.generation_id
    left join text_scores
        on pair_texts.pair_id = text_scores.pair_id
    left join refusals as neutral_refusals
        on pair_texts.neutral_generation_id = neutral_refusals.generation_id
    left join refusals as disability_refusals
        on pair_texts.disability_generation_id = disability_refusals.generation_id
    left join rubric_judges
        on pair_texts.pair_id = rubric_judges.pair_id
    left join contrastive_judges
        on pair_texts.pair_id = contrastive_judges.pair_id

),

final as (

    select
        {{ pair_columns() }}
        neutral_generation_id,
        disability_generation_id,
        run_id,
        pair_status,
        neutral_status,
        disability_status,
        neutral_source,
        disability_source,
        disability_adapter,
        disability_system_prompt,
        neutral_prompt_id,
        disability_prompt_id,
        neutral_prompt_text,
        disability_prompt_text,
        neutral_response_text,
        disability_response_text,
        neutral_finish_reason,
        disability_finish_reason,
        truncated,
        neutral_max_new_tokens,
        disability_max_new_tokens,
        neutral_completion_tokens,
        disability_completion_tokens,
        {%- for m in text_metrics %}
            neutral_{{ m }},
            disability_{{ m }},
            disability_{{ m }} - neutral_{{ m }} as {{ m }}_delta,
            {{ m }}_included,
            {{ m }}_exclusion_reason,
            {{ m }}_degraded,
        {%- endfor %}
        {%- for m in pair_metrics %}
            {{ m }}_threshold,
        {%- endfor %}
        threshold,
        degradation_rule,
        neutral_refused,
        neutral_refusal_source,
        disability_refused,
        disability_refusal_source,
        n_rubric_judges,
        n_rubric_judges_included,
        n_rubric_judges_degraded,
        rubric_judge_scores,
        n_contrastive_judges,
        n_contrastive_judges_included,
        n_contrastive_interpret_yes,
        n_contrastive_stereotype_yes,
        n_contrastive_framing_yes,
        n_contrastive_abstain_yes,
        contrastive_verdicts

    from joined

)

select * from final
