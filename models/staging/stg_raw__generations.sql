with

generations as (

    select * from {{ source('raw', 'generations') }}

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
