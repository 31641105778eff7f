{#
    Every generation x metric, long: one row per (generation_id, metric), the
    score under the current scorer version, and a status for a missing score.
    To add a metric: a row in seeds/metrics.csv, a CTE below producing the same
    columns (e.g. judge_score from the judgments, keyed by generation_id), and
    a `union all` line.
#}
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

vader_scores as (

    {{ text_metric_scores('generations', 'vader', 'vader', 'vader_compound') }}

),

regard_scores as (

    {{ text_metric_scores('generations', 'regard', 'regard', 'regard', reason_column='regard.reason') }}

),

verbosity_scores as (

    {{ text_metric_scores('generations', 'verbosity', 'verbosity', 'word_count') }}

),

final as (

    select * from vader_scores
    union all
    select * from regard_scores
    union all
    select * from verbosity_scores

)

select * from final
