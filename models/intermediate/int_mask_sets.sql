{#
    The mask set of each disability category: what a masked scorer
    (ableaudit.scorers.masking) replaces by its neutral token in both answers of
    a pair of the category. Its query_phrase (the phrase the prompts of the
    ableaudit query set carry) and its terms of seed disability_terms with their
    plurals, lowercase and distinct. mask_digest identifies the set: a masked
    score is kept per text, mask_digest and scorer version, so editing a
    category's terms scores its texts again, and only those.
#}
{{ config(materialized='table') }}

with

disabilities as (

    select * from {{ ref('stg_seeds__disabilities') }}

),

disability_terms as (

    select * from {{ ref('disability_terms') }}

),

listed_terms as (

    select
        disability_id,
        query_phrase as term

    from disabilities

    union all

    select
        disability_id,
        term

    from disability_terms

    union all

    select
        disability_id,
        plural as term

    from disability_terms
    where plural is not null

),

distinct_terms as (

    select
        disability_id,
        lower(trim(term)) as term

    from listed_terms
    group by disability_id, lower(trim(term))

),

final as (

    select
        disabilities.disability_id,
        list_sort(list(distinct_terms.term)) as terms,
        count(*) as n_terms,
        {{ sha256_hex("array_to_string(list_sort(list(distinct_terms.term)), '|')") }} as mask_digest

    from disabilities
    inner join distinct_terms
        on disabilities.disability_id = distinct_terms.disability_id
    group by disabilities.disability_id

)

select * from final
