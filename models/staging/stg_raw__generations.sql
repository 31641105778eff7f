{#
    Every landed generation, with the hash of its text. A table built
    incrementally (docs/incremental.md): a build adds the rows of the landings new
    since the last one, so each text is hashed once; anything else than new
    landings rebuilds it in full (macro incremental_plan).
#}
{{
    config(
        materialized='incremental',
        incremental_strategy='delete+insert',
        unique_key='generation_id',
        on_schema_change='sync_all_columns',
        pre_hook="{{ incremental_reset() }}",
        post_hook=["{{ incremental_record() }}", "{{ record_group_fingerprints() }}"],
    )
}}
{%- set plan = incremental_plan() %}

with

generations as (

    select * from {{ source('raw', 'generations') }}
    {%- if not plan.full %}
    where landing_id in ({{ landing_list(plan) }})
    {%- endif %}

),

final as (

    select
        generation_id,
        run_id,
        task,
        target,
        model_id,
        backend,
        model_revision,
        adapter,
        arm,
        query_set,
        query_id,
        domain,
        disability_id,
        condition,
        prompt_id,
        system_prompt,
        prompt_text,
        temperature,
        top_p,
        max_new_tokens,
        seed,
        sample_index,
        decoding_json,
        status,
        finish_reason,
        response_text,
        -- scores are keyed by the text, so a text is scored once however often it recurs
        {{ sha256_hex('response_text') }} as text_hash,
        error_message,
        prompt_tokens,
        completion_tokens,
        latency_ms,
        source,
        created_at,
        landing_id

    from generations

)

select * from final
