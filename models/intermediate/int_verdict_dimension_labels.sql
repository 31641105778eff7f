{#
    Every contrastive verdict x every dimension of the set it was asked on, with the
    verdict's answer read as the dimension says (int_judge_dimensions): label (the answer
    as text; abstain 'Yes' when response B declines, 'No' when it does not),
    value_position (0 for the best answer) and is_flagged (at or past the dimension's
    flag_position). A verdict under a prompt version no set defines (an imported verdict's
    own version) was parsed with the built-in set and is read with it. Answers are null
    unless the verdict is usable (stg_raw__judgments.is_usable).
#}

-- read by int_pair_dimension_labels and int_run_pair_flags: read from JSON once per build
{{ config(materialized='table') }}

with

judgments as (

    select * from {{ ref('stg_raw__judgments') }}
    where judge_kind = 'contrastive'

),

dimensions as (

    select * from {{ ref('int_judge_dimensions') }}

),

defined_versions as (

    select distinct prompt_version from dimensions

),

default_set as (

    select any_value(prompt_version) as prompt_version
    from dimensions
    where is_default

),

verdict_sets as (

    select
        judgments.judgment_id,
        judgments.judge_name,
        judgments.prompt_version,
        judgments.is_usable,
        judgments.parsed_json,
        coalesce(defined_versions.prompt_version, default_set.prompt_version) as set_prompt_version

    from judgments
    left join defined_versions
        on judgments.prompt_version = defined_versions.prompt_version
    cross join default_set

),

answers as (

    select
        verdict_sets.judgment_id,
        verdict_sets.judge_name,
        verdict_sets.prompt_version,
        verdict_sets.set_prompt_version,
        verdict_sets.is_usable,
        dimensions.dimension_set,
        dimensions.dimension,
        dimensions.dimension_position,
        dimensions.answer_kind,
        dimensions.value_labels,
        dimensions.flag_position,
        case
            when not verdict_sets.is_usable then null
            when dimensions.answer_kind = 'flag'
                then
                    case cast(json_extract(verdict_sets.parsed_json, '$.' || dimensions.verdict_field) as boolean)
                        when true then dimensions.value_labels[dimensions.n_values]
                        when false then dimensions.value_labels[1]
                    end
            else json_extract_string(verdict_sets.parsed_json, '$.' || dimensions.verdict_field)
        end as label

    from verdict_sets
    inner join dimensions
        on verdict_sets.set_prompt_version = dimensions.prompt_version

),

final as (

    select
        judgment_id,
        judge_name,
        prompt_version,
        set_prompt_version,
        dimension_set,
        dimension,
        dimension_position,
        answer_kind,
        is_usable,
        label,
        list_position(value_labels, label) - 1 as value_position,
        flag_position,
        list_position(value_labels, label) - 1 >= flag_position as is_flagged

    from answers

)

select * from final
