{#-
    The DPO train / held-out split of a query (or image): 'heldout' when the
    first 32 bits of sha256(query_set || '|' || query_id), mod 10000, fall
    below var('preference_heldout_share') x 10000, else 'train'. Whole queries
    fall on one side, so preference_pairs (what DPO trains on, through
    int_preference_splits) and mitigation_effect (where DPO is compared)
    split the same way. Python never recomputes it: the preference export
    reads int_preference_splits.
-#}
{% macro preference_heldout_share() -%}
    {%- set share = var('preference_heldout_share', 0.2) | float -%}
    {%- if share < 0 or share > 1 -%}
        {{ exceptions.raise_compiler_error("var preference_heldout_share must lie in 0..1, got " ~ share) }}
    {%- endif -%}
    {{ return(share) }}
{%- endmacro %}

{% macro preference_split_group(query_set, query_id) -%}
    {{ query_set }} || '|' || {{ query_id }}
{%- endmacro %}

{% macro preference_split(query_set, query_id) -%}
    case
        when cast('0x' || left({{ sha256_hex(preference_split_group(query_set, query_id)) }}, 8) as bigint) % 10000
            < {{ (preference_heldout_share() * 10000) | round | int }} then 'heldout'
        else 'train'
    end
{%- endmacro %}
