{#
    Every NQ-DQ pair x every contrastive judge, with the judge's current verdict
    on the pair and the explicit rule for entering interpretive_shift: a pair
    counts (included) only when it is complete and its verdict is usable;
    otherwise exclusion_reason says why (the pair's status, 'not_judged',
    'unparseable' or 'call_error').

    A contrastive verdict is keyed by content like a rubric one: it names the
    first pair judged with its two questions and two responses, and attaches to
    every pair whose neutral and disability-aware prompts and responses (from
    int_pair_texts) equal those (null-safe). Per pair and judge the latest
    landed verdict wins.
#}

-- read by several marts and data tests: joined once per build, not on every read
{{ config(materialized='table') }}

with

-- inlined where it is read: materialised, DuckDB would copy every text of it first
pairs as not materialized (

    select * from {{ ref('int_pair_texts') }}

),

-- inlined where it is read: materialised, DuckDB would copy every text of it first
generations as not materialized (

    select * from {{ ref('stg_raw__generations') }}

),

judgments as (

    select * from {{ ref('stg_raw__judgments') }}
    where judge_kind = 'contrastive'

),

contrastive_judges as (

    select distinct judge_name from judgments

),

pair_texts as (

    -- a pair without a neutral generation has no question A and attaches to no verdict
    select
        pair_id,
        neutral_prompt_text as question_a,
        neutral_response_text as response_a,
        disability_prompt_text as question_b,
        disability_response_text as response_b

    from pairs
    where neutral_generation_id is not null

),

verdict_subjects as (

    -- a verdict whose generations have not landed has no content to attach by (counted in judgment_quality)
    select
        judgments.*,
        neutral.prompt_text as question_a,
        neutral.response_text as response_a,
        disability.prompt_text as question_b,
        disability.response_text as response_b

    from judgments
    inner join generations as neutral
        on judgments.neutral_generation_id = neutral.generation_id
    inner join generations as disability
        on judgments.disability_generation_id = disability.generation_id

),

attached as (

    select
        pair_texts.pair_id,
        verdict_subjects.*,
        row_number() over (
            partition by pair_texts.pair_id, verdict_subjects.judge_name
            order by verdict_subjects.created_at desc, verdict_subjects.judgment_id desc
        ) as verdict_rank,
        count(*) over (partition by pair_texts.pair_id, verdict_subjects.judge_name) as n_candidate_verdicts

    from pair_texts
    inner join verdict_subjects
        on {{ join_keys(
            'pair_texts', 'verdict_subjects',
            ['question_a', 'response_a', 'question_b', 'response_b'],
            nullable=['response_a', 'response_b'],
        ) }}

),

current_verdicts as (

    select * from attached
    where verdict_rank = 1

),

pair_judges as (

    select
        pairs.*,
        contrastive_judges.judge_name

    from pairs
    cross join contrastive_judges

),

with_verdicts as (

    select
        pair_judges.*,
        current_verdicts.judgment_id,
        current_verdicts.neutral_generation_id as judged_neutral_generation_id,
        current_verdicts.disability_generation_id as judged_disability_generation_id,
        current_verdicts.judge_model,
        current_verdicts.judge_revision,
        current_verdicts.prompt_version,
        current_verdicts.verdict_status,
        coalesce(current_verdicts.is_usable, false) as is_usable,
        current_verdicts.interpret,
        current_verdicts.stereotype,
        current_verdicts.framing,
        current_verdicts.decline_in_response_a,
        current_verdicts.decline_in_response_b,
        current_verdicts.n_spans_not_found,
        coalesce(current_verdicts.n_candidate_verdicts, 0) as n_candidate_verdicts

    from pair_judges
    left join current_verdicts
        on pair_judges.pair_id = current_verdicts.pair_id
        and pair_judges.judge_name = current_verdicts.judge_name

),

ruled as (

    select
        *,
        case
            when pair_status != 'complete' then pair_status
            when judgment_id is null then 'not_judged'
            when not is_usable then verdict_status
        end as exclusion_reason

    from with_verdicts

),

final as (

    select
        {{ pair_columns() }}
        neutral_generation_id,
        disability_generation_id,
        pair_status,
        run_id,
        judge_name,
        judgment_id,
        judged_neutral_generation_id,
        judged_disability_generation_id,
        judge_model,
        judge_revision,
        prompt_version,
        verdict_status,
        exclusion_reason is null as included,
        exclusion_reason,
        -- labels only for pairs that count: an excluded pair never carries a "No"
        case when exclusion_reason is null then interpret end as interpret,
        case when exclusion_reason is null then stereotype end as stereotype,
        case when exclusion_reason is null then framing end as framing,
        case when exclusion_reason is null then decline_in_response_a end as decline_in_response_a,
        case when exclusion_reason is null then decline_in_response_b end as decline_in_response_b,
        n_spans_not_found,
        n_candidate_verdicts

    from ruled

)

select * from final
