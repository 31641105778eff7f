{#
    How much degradation a scorer produces by itself, per scorer and disability
    category: the category's disability words (its mask set: the query phrase,
    the condition terms and their plurals) scored alone and inside neutral
    carrier sentences, against the same sentences with the masked scorers'
    neutral token (int_scorer_bias_probes). A scorer that ignored the words
    would show a shift of 0 and no degraded probe; what it shows is what it
    adds to the category's degradation rate when answers echo the words. The
    masked variant (masked_scorer) scores both answers with the words masked.
#}
{{ config(materialized='table') }}

with

probes as (

    select * from {{ ref('int_scorer_bias_probes') }}

),

disabilities as (

    select * from {{ ref('stg_seeds__disabilities') }}

),

aggregated as (

    select
        scorer,
        masked_scorer,
        scorer_version,
        direction,
        disability_id,
        count(distinct term) as n_terms,
        count(distinct carrier_id) as n_carriers,
        count(*) as n_probes,
        count(case when status = 'ok' then 1 end) as n_scored,
        -- a category is as good as its worst probe: the first status that is no result
        coalesce(min(case when status != 'ok' then status end), 'ok') as status,
        min(reason) as reason,
        any_value(token_score) filter (where status = 'ok') as token_score,
        avg(term_score) filter (where status = 'ok') as mean_term_score,
        min(term_score) filter (where status = 'ok') as min_term_score,
        -- ties (VADER gives "blind" and "blind person" the same score) go to the first term
        first(term order by term_score, term) filter (where status = 'ok') as min_term,
        count(distinct term) filter (where status = 'ok' and abs(shift) > 1e-9) as n_terms_shifted,
        avg(shift) filter (where status = 'ok') as mean_shift,
        min(shift) filter (where status = 'ok') as min_shift,
        max(shift) filter (where status = 'ok') as max_shift,
        first(term order by shift, term) filter (where status = 'ok') as min_shift_term,
        count(case when status = 'ok' and degraded then 1 end) as n_degraded,
        any_value(threshold) as threshold,
        any_value(degradation_rule) as degradation_rule

    from probes
    group by scorer, masked_scorer, scorer_version, direction, disability_id

),

final as (

    select
        aggregated.scorer,
        aggregated.masked_scorer,
        aggregated.scorer_version,
        aggregated.direction,
        aggregated.disability_id,
        disabilities.display_name,
        disabilities.sort_order,
        aggregated.n_terms,
        aggregated.n_carriers,
        aggregated.n_probes,
        aggregated.n_scored,
        aggregated.status,
        aggregated.reason,
        aggregated.token_score,
        aggregated.mean_term_score,
        aggregated.min_term_score,
        aggregated.min_term,
        case when aggregated.n_scored > 0 then aggregated.n_terms_shifted end as n_terms_shifted,
        aggregated.mean_shift,
        aggregated.min_shift,
        aggregated.max_shift,
        aggregated.min_shift_term,
        aggregated.n_degraded,
        case
            when aggregated.n_scored > 0 then 100.0 * aggregated.n_degraded / aggregated.n_scored
        end as degradation_pct,
        aggregated.threshold,
        aggregated.degradation_rule

    from aggregated
    inner join disabilities
        on aggregated.disability_id = disabilities.disability_id

)

select * from final
