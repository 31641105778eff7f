{#
    Preference data for DPO (VLM paper section 6.2). Where a contrastive judge
    flags the disability-aware response of a pair (interpret, stereotype or
    framing is 'Yes'; only usable verdicts: int_pair_judgments.included), the
    pair becomes a preference: prompt = the disability prompt (with its system
    prompt, and its image for a vision pair), rejected = the flagged response,
    chosen = a faithful response:

      var('preference_chosen') = 'neutral' (default, as in the paper): the
          neutral response of the same pair;
      'mitigation': the disability response of another arm (e.g. a prompt
          mitigation arm) for the same model, query, disability, temperature and
          sample that the same judge found faithful (interpret, stereotype and
          framing 'No', no decline); the neutral response where none exists.

    One row per flagged pair and judge. A row that must not be trained on keeps
    its place with a status: 'chosen_declines' (the neutral response declines to
    answer, so it is no faithful answer), 'identical_texts' (chosen = rejected).
    split (from int_preference_splits) puts whole queries (images) in
    'heldout' with probability var('preference_heldout_share'), from a hash of
    query_set and query_id, so a re-audit on the held-out queries compares
    base, prompt mitigation and DPO on pairs the adapter never trained on.
    The texts come from int_pair_texts.
#}
{%- set chosen_rule = var('preference_chosen', 'neutral') -%}
{%- if chosen_rule not in ['neutral', 'mitigation'] -%}
    {{ exceptions.raise_compiler_error("var preference_chosen must be 'neutral' or 'mitigation', got '" ~ chosen_rule ~ "'") }}
{%- endif -%}
with

pair_judgments as (

    select * from {{ ref('int_pair_judgments') }}

),

-- inlined where it is read: materialised, DuckDB would copy every text of it first
pair_texts as not materialized (

    select * from {{ ref('int_pair_texts') }}

),

splits as (

    select * from {{ ref('int_preference_splits') }}

),

images as (

    select * from {{ ref('stg_raw__images') }}

),

flagged as (

    select
        *,
        concat_ws(
            ',',
            case when interpret = 'Yes' then 'interpret' end,
            case when stereotype = 'Yes' then 'stereotype' end,
            case when framing = 'Yes' then 'framing' end
        ) as flagged_dimensions

    from pair_judgments
    where
        included
        and (interpret = 'Yes' or stereotype = 'Yes' or framing = 'Yes')

),

faithful as (

    -- disability responses the judge found faithful: no shift, stereotype or framing, no decline
    select * from pair_judgments
    where
        included
        and interpret = 'No'
        and stereotype = 'No'
        and framing = 'No'
        and not decline_in_response_b

),

alternatives as (

    select
        flagged.pair_id,
        flagged.judge_name,
        faithful.arm as alternative_arm,
        faithful.pair_id as alternative_pair_id,
        faithful.disability_generation_id as alternative_generation_id,
        row_number() over (
            partition by flagged.pair_id, flagged.judge_name
            order by faithful.arm, faithful.disability_generation_id
        ) as alternative_rank,
        count(*) over (partition by flagged.pair_id, flagged.judge_name) as n_faithful_alternatives

    from flagged
    inner join faithful
        on {{ join_keys(
            'flagged', 'faithful',
            ['judge_name', 'task', 'model_id', 'query_set', 'query_id', 'disability_id', 'temperature', 'sample_index'],
            nullable=['temperature'],
        ) }}
        and flagged.arm != faithful.arm

),

picked as (

    select
        flagged.*,
        alternatives.alternative_arm,
        coalesce(alternatives.n_faithful_alternatives, 0) as n_faithful_alternatives,
        {% if chosen_rule == 'mitigation' -%}
        coalesce(alternatives.alternative_generation_id, flagged.neutral_generation_id) as chosen_generation_id,
        coalesce(alternatives.alternative_pair_id, flagged.pair_id) as chosen_pair_id,
        coalesce('arm:' || alternatives.alternative_arm, 'neutral') as chosen_source
        {%- else -%}
            flagged.neutral_generation_id as chosen_generation_id,
            flagged.pair_id as chosen_pair_id,
            'neutral' as chosen_source
        {%- endif %}

    from flagged
    left join alternatives
        on flagged.pair_id = alternatives.pair_id
        and flagged.judge_name = alternatives.judge_name
        and alternatives.alternative_rank = 1

),

with_texts as (

    -- rejected: the flagged pair's disability side; chosen: the neutral side of the
    -- chosen pair (the flagged one) or the disability side of another arm's pair
    select
        picked.*,
        rejected.disability_system_prompt as system_prompt,
        rejected.disability_prompt_text as prompt_text,
        rejected.disability_adapter as rejected_adapter,
        rejected.disability_response_text as rejected_text,
        case
            when picked.chosen_source = 'neutral' then chosen.neutral_response_text
            else chosen.disability_response_text
        end as chosen_text

    from picked
    inner join pair_texts as rejected
        on picked.pair_id = rejected.pair_id
    inner join pair_texts as chosen
        on picked.chosen_pair_id = chosen.pair_id

),

with_images as (

    select
        with_texts.*,
        images.image_set,
        images.image_id,
        images.rel_path as image_rel_path,
        images.image_sha256,
        splits.split_group,
        splits.split,
        splits.heldout_share

    from with_texts
    inner join splits
        on with_texts.task = splits.task
        and with_texts.model_id = splits.model_id
        and with_texts.query_set = splits.query_set
        and with_texts.query_id = splits.query_id
    left join images
        on with_texts.task = 'vision'
        and with_texts.query_set = images.image_set
        and with_texts.query_id = images.image_id

),

final as (

    select
        {{ hash_key(['pair_id', 'judge_name']) }} as preference_id,
        pair_id,
        judge_name,
        judgment_id,
        task,
        model_id,
        arm,
        query_set,
        query_id,
        domain,
        disability_id,
        temperature,
        sample_index,
        flagged_dimensions,
        interpret,
        stereotype,
        framing,
        decline_in_response_b as rejected_declines,
        system_prompt,
        prompt_text,
        image_set,
        image_id,
        image_rel_path,
        image_sha256,
        chosen_source,
        chosen_generation_id,
        chosen_text,
        disability_generation_id as rejected_generation_id,
        rejected_adapter,
        rejected_text,
        n_faithful_alternatives,
        split_group,
        split,
        heldout_share,
        case
            when chosen_source = 'neutral' and decline_in_response_a then 'chosen_declines'
            when chosen_text = rejected_text then 'identical_texts'
            else 'ok'
        end as status

    from with_images

)

select * from final
