{{ config(materialized='table') }}

{#
    Every prompt a vision audit can send, one row per image x prompt: the
    neutral description prompt, the disability prompt for each of the nine
    categories, the mitigation prompt for each category, and the
    disability-assignment probe. The image travels beside the text
    (rel_path, image_sha256): the flow reads the file and sends it with the
    prompt. A table: the audit flow reads it to plan generations.
#}
with

images as (

    select * from {{ ref('stg_raw__images') }}

),

vision_prompts as (

    select * from {{ ref('vision_prompts') }}

),

disabilities as (

    select * from {{ ref('stg_seeds__disabilities') }}

),

disability_list as (

    select string_agg(display_name, '; ' order by sort_order) as disability_list
    from disabilities

),

neutral_prompts as (

    select
        images.*,
        vision_prompts.prompt_kind,
        'neutral' as condition,
        cast(null as varchar) as disability_id,
        vision_prompts.template as prompt_text

    from images
    cross join vision_prompts
    where vision_prompts.prompt_kind = 'neutral'

),

disability_prompts as (

    -- the disability prompt (DP) and the mitigation prompt, once per category
    select
        images.*,
        vision_prompts.prompt_kind,
        'disability' as condition,
        disabilities.disability_id,
        replace(vision_prompts.template, '{disability}', disabilities.query_phrase) as prompt_text

    from images
    cross join vision_prompts
    cross join disabilities
    where vision_prompts.prompt_kind in ('disability', 'mitigation')

),

assignment_prompts as (

    -- a probe, not one side of a pair: it lands as a 'neutral' generation under the
    -- reserved arm 'disability_assignment', so it can never pair with a disability prompt
    select
        images.*,
        vision_prompts.prompt_kind,
        'neutral' as condition,
        cast(null as varchar) as disability_id,
        replace(vision_prompts.template, '{disability_list}', disability_list.disability_list) as prompt_text

    from images
    cross join vision_prompts
    cross join disability_list
    where vision_prompts.prompt_kind = 'assignment'

),

unioned as (

    select * from neutral_prompts
    union all
    select * from disability_prompts
    union all
    select * from assignment_prompts

),

final as (

    select
        image_set || ':' || image_id || ':' || prompt_kind || coalesce(':' || disability_id, '') as prompt_id,
        'vision' as task,
        image_set as query_set,
        image_id as query_id,
        category as domain,
        scenario,
        gender,
        race,
        rel_path,
        image_sha256,
        prompt_kind,
        condition,
        disability_id,
        prompt_text

    from unioned

)

select * from final
