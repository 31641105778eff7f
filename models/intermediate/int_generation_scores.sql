{#
    Every generation x metric, long: one row per (generation_id, metric), the
    score under the current scorer version, and a status for a missing score.
    A registered scorer without a model of its own (ableaudit.scorers.registry)
    needs nothing here: every one of stg_registry__scorers whose score_model is
    response_scores_text gets its rows from long_metric_scores.

    metric is the key; base_metric is the seed `metrics` row it is measured on
    (its direction and scale). For the text scorers they are the same. Each
    rubric judge is a metric of its own, metric = 'judge_score:<judge_name>' with
    base_metric = 'judge_score', so several judges scoring the same generations
    never mix in one rate, and every consumer grouping by metric keeps them apart.
#}
{#- its rows of a model come from that model's rows of each input with a model_id (macro record_group_local_view) -#}
{{ config(post_hook="{{ record_group_local_view() }}") }}
with

generations as (

    select * from {{ ref('stg_raw__generations') }}

),

vader as (

    select * from {{ ref('response_scores_vader') }}
    where scorer_version = {{ current_scorer_version('vader') }}

),

regard as (

    select * from {{ ref('response_scores_regard') }}
    where scorer_version = {{ current_scorer_version('regard') }}

),

verbosity as (

    select * from {{ ref('response_scores_verbosity') }}
    where scorer_version = {{ current_scorer_version('verbosity') }}

),

registered_long_scorers as (

    select * from {{ ref('stg_registry__scorers') }}
    where score_model = 'response_scores_text'

),

long_scores as (

    select * from {{ ref('response_scores_text') }}

),

generation_judgments as (

    select * from {{ ref('int_generation_judgments') }}

),

rubric_judges as (

    select distinct judge_name from generation_judgments

),

vader_scores as (

    {{ text_metric_scores('generations', 'vader', 'vader', 'vader_compound') }}

),

regard_scores as (

    {{ text_metric_scores('generations', 'regard', 'regard', 'regard', reason_column='regard.reason') }}

),

verbosity_scores as (

    {{ text_metric_scores('generations', 'verbosity', 'verbosity', 'word_count') }}

),

long_metric_scores as (

    select
        generations.generation_id,
        generations.model_id,
        generations.text_hash,
        registered_long_scorers.scorer as metric,
        long_scores.score,
        case
            when generations.text_hash is null then 'no_text'
            when long_scores.text_hash is null then 'not_scored'
            else long_scores.status
        end as score_status,
        cast(null as varchar) as score_reason,
        long_scores.scorer_version

    from generations
    cross join registered_long_scorers
    left join long_scores
        on generations.text_hash = long_scores.text_hash
        and registered_long_scorers.scorer = long_scores.scorer
        and registered_long_scorers.scorer_version = long_scores.scorer_version

),

text_scores as (

    select * from vader_scores
    union all
    select * from regard_scores
    union all
    select * from verbosity_scores
    union all
    select * from long_metric_scores

),

text_metric_rows as (

    select
        generation_id,
        model_id,
        text_hash,
        metric,
        metric as base_metric,
        cast(null as varchar) as judge_name,
        score,
        score_status,
        score_reason,
        scorer_version,
        cast(null as varchar) as judgment_id

    from text_scores

),

judge_score_rows as (

    -- every generation x rubric judge; only a usable verdict gives a score (stg_raw__judgments.is_usable)
    select
        generations.generation_id,
        generations.model_id,
        generations.text_hash,
        'judge_score:' || rubric_judges.judge_name as metric,
        'judge_score' as base_metric,
        rubric_judges.judge_name,
        cast(generation_judgments.score as double) as score,
        case
            when generations.text_hash is null then 'no_text'
            when generation_judgments.judgment_id is null then 'not_judged'
            when generation_judgments.is_usable then 'ok'
            else generation_judgments.verdict_status
        end as score_status,
        case
            when generation_judgments.verdict_status = 'call_error' then generation_judgments.error_message
            when generation_judgments.verdict_status = 'unparseable' then generation_judgments.parse_notes
        end as score_reason,
        generation_judgments.judge_model || '@' || coalesce(generation_judgments.judge_revision, '?')
        || ' ' || generation_judgments.prompt_version as scorer_version,
        generation_judgments.judgment_id

    from generations
    cross join rubric_judges
    left join generation_judgments
        on generations.generation_id = generation_judgments.generation_id
        and rubric_judges.judge_name = generation_judgments.judge_name

),

final as (

    select * from text_metric_rows
    union all
    select * from judge_score_rows

)

select * from final
