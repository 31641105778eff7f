{#
    The rule that lets a mart of per-model rows (each row of one model_id, computed from
    that model's rows alone) compute again only the models whose inputs changed
    (docs/incremental.md, "Marts built model by model").

    Its inputs are incremental models that record the fingerprint of each model's rows
    (dbt_state.group_fingerprints, macro record_group_fingerprints). When the mart builds, it
    keeps those fingerprints as they were (dbt_state.model_scope_inputs) with its settings (its
    reuse key, macro reuse_key, and what it reads outside the graph: a digest of the verdicts). The next
    build computes again the models whose fingerprint differs in any input (new, gone or
    changed models): their rows are deleted and inserted again; the other models' rows stay.
    A build with other settings, without a record, or with an input that has no fingerprints
    computes every model.

    A mart that also reads per-text rows (scores keyed by text_hash, which a model's
    fingerprints do not cover) names them as `texts`: {'snapshot': a dbt_state table of its
    own, 'sql': the rows (scorer, text_hash, score, status)}. It keeps a copy of those rows as
    of its last build, and the next build also computes again every model with a generation
    whose text's rows changed since (a Regard text scored at last, a text scored for the
    first time).
#}

{% macro model_scope_relation() -%}
    dbt_state.model_scope_inputs
{%- endmacro %}

{#- The names of `inputs` (models of this project) as dbt_state.group_fingerprints records them. -#}
{% macro model_scope_names(inputs) -%}
    {%- set names = [] -%}
    {%- for name in inputs -%}
        {%- do names.append(this.schema ~ "." ~ name) -%}
    {%- endfor -%}
    {{ return(sql_literals(names)) }}
{%- endmacro %}

{#-
    What this build of the mart computes: {'full': true}, or {'full': false, 'models': [...]}
    (the model_ids whose inputs changed; None for rows without one). Called by the mart's
    query and its pre-hook, which see the same state (the post-hook records the new one).
-#}
{% macro model_scope_plan(inputs, extra=[], texts=none) -%}
    {#- a unit test (no relation of its own) builds from its fixtures alone -#}
    {%- if not execute or this is none or model.resource_type != 'model' or not is_incremental() -%}
        {{ return({'full': true, 'models': []}) }}
    {%- endif -%}
    {%- do ensure_model_scope() -%}
    {%- do ensure_group_fingerprints() -%}
    {%- set settings = incremental_settings(extra) -%}
    {%- set query -%}
        with
        now_inputs as (
            select relation, model_id, n_rows, hash_sum, hash_xor
            from {{ group_fingerprints_relation() }}
            where relation in ({{ model_scope_names(inputs) }})
        ),
        recorded as (
            select settings, relation, model_id, n_rows, hash_sum, hash_xor
            from {{ model_scope_relation() }}
            where model = '{{ this.identifier }}'
        )
        select
            (select count(*) from recorded),
            (select count(*) from recorded where settings != '{{ settings }}'),
            (select count(distinct relation) from now_inputs),
            (
                select coalesce(to_json(list(distinct coalesce(now_inputs.model_id, recorded.model_id))), '[]')
                from now_inputs
                full join recorded
                    on now_inputs.relation = recorded.relation
                    and now_inputs.model_id is not distinct from recorded.model_id
                where (now_inputs.n_rows, now_inputs.hash_sum, now_inputs.hash_xor)
                    is distinct from (recorded.n_rows, recorded.hash_sum, recorded.hash_xor)
            )
    {%- endset -%}
    {%- set row = run_query(query).rows[0] -%}
    {%- if row[0] == 0 or row[1] > 0 or row[2] < inputs | length -%}
        {{ return({'full': true, 'models': []}) }}
    {%- endif -%}
    {%- set models = fromjson(row[3]) -%}
    {%- if texts -%}
        {%- set query -%}
            select coalesce(to_json(list(distinct model_id)), '[]')
            from {{ built_relation('stg_raw__generations') }}
            where text_hash in ({{ changed_score_texts_sql(texts.snapshot, texts.sql) }})
        {%- endset -%}
        {%- for model_id in fromjson(run_query(query).rows[0][0]) -%}
            {%- if model_id not in models -%}
                {%- do models.append(model_id) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return({'full': false, 'models': models}) }}
{%- endmacro %}

{% macro ensure_model_scope() -%}
    {%- do ensure_state_table(model_scope_relation(), [
        'model varchar', 'settings varchar', 'relation varchar', 'model_id varchar',
        'n_rows bigint', 'hash_sum hugeint', 'hash_xor ubigint',
    ]) -%}
{%- endmacro %}

{#- A filter on model_id to the plan's models; nothing on a full build. -#}
{% macro model_scope_filter(plan) -%}
    {%- if not plan.full -%}
        {%- set named = plan.models | reject('none') | list -%}
        {%- set parts = ['false'] -%}
        {%- if named -%}
            {%- do parts.append('model_id in (' ~ sql_literals(named) ~ ')') -%}
        {%- endif -%}
        {%- if named | length < plan.models | length -%}
            {%- do parts.append('model_id is null') -%}
        {%- endif -%}
    where {{ parts | join(' or ') }}
    {%- endif -%}
{%- endmacro %}

{#-
    The rows of `relation` of the plan's models (all on a full build), read model by model
    (macro rows_of_models): for a view whose filter on model_id must reach the scans below an
    aggregate.
-#}
{% macro model_scope_rows(relation, plan) -%}
    {{ rows_of_models(relation, none if plan.full else plan.models) }}
{%- endmacro %}

{#- Pre-hook: the rows of the models computed again are deleted (all of them on a full build). -#}
{% macro model_scope_reset(inputs, extra=[], texts=none) -%}
    {%- if execute and is_incremental() -%}
        delete from {{ this }} {{ model_scope_filter(model_scope_plan(inputs, extra, texts)) }}
    {%- else -%}
        select 1
    {%- endif -%}
{%- endmacro %}

{#- Post-hook: the fingerprints of the inputs the mart was built from, for the next build's plan. -#}
{% macro model_scope_record(inputs, extra=[], texts=none) -%}
    {%- if execute -%}
        {%- do ensure_model_scope() -%}
        {%- do ensure_group_fingerprints() -%}
        delete from {{ model_scope_relation() }} where model = '{{ this.identifier }}';
        insert into {{ model_scope_relation() }}
        select '{{ this.identifier }}', '{{ incremental_settings(extra) }}', relation, model_id,
            n_rows, hash_sum, hash_xor
        from {{ group_fingerprints_relation() }}
        where relation in ({{ model_scope_names(inputs) }})
        {%- if texts -%}
        {%- do ensure_text_snapshot(texts.snapshot) -%};
        delete from {{ texts.snapshot }};
        insert into {{ texts.snapshot }} {{ texts.sql }}
        {%- endif -%}
    {%- else -%}
        select 1
    {%- endif -%}
{%- endmacro %}

{#-
    data_quality: its inputs (fingerprinted per model), every landed verdict (the rubric judges
    are every model's metrics) and the per-text scores int_generation_scores reads (kept in
    dbt_state.data_quality_texts).
-#}
{% macro data_quality_scope() -%}
    {{ return({
        'inputs': ['stg_raw__generations', 'int_pairs', 'int_pair_texts', 'int_pair_scores'],
        'extra': verdicts_digest(),
        'texts': {'snapshot': 'dbt_state.data_quality_texts', 'sql': scored_texts_sql()},
    }) }}
{%- endmacro %}
