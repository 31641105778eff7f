{#
    The assistive-technology matcher, built at run time from
    seeds/assistive_technologies.csv and returned as SQL literals, so the
    compiled model holds two constant regexes (compiled once, not per row):

    - pattern: every synonym and exclusion of every technology in one
      alternation, longest first, between word boundaries, with an optional
      plural 's'/'es'. A space or hyphen in a phrase matches any run of spaces
      and hyphens, or none; a lowercase letter matches either case, an
      uppercase letter only itself. Where phrases overlap, the match that
      starts first wins, then the longest ("ramp up" hides "ramp",
      "wheelchair lift" hides "wheelchair").
    - negated_pattern: a negation cue, at most three words without
      punctuation, then a phrase (capture group 1): the first mention after
      the cue is negated.
    - version: the rules ('assistive-tech.v1': bump it when this macro or the
      matching in response_assistive_tech changes) plus a hash of every
      technology's synonyms and exclusions. Editing a synonym re-matches every
      text; editing a fit or a description does not (fit is applied at build time).
#}
{% macro assistive_tech_matcher() -%}
    {%- set placeholder = {
        'version': "'(not executed)'",
        'pattern': "'[^\\s\\S]'",
        'negated_pattern': "'([^\\s\\S])'",
    } -%}
    {%- set seed = ref('assistive_technologies') -%}
    {%- if not execute or adapter.get_relation(seed.database, seed.schema, seed.identifier) is none -%}
        {{ return(placeholder) }}
    {%- endif -%}
    {%- set query -%}
        with

        technologies as (

            select * from {{ seed }}

        ),

        phrases as (

            select trim(unnest(string_split(synonyms, '|'))) as phrase from technologies
            union all
            select trim(unnest(string_split(exclusions, '|'))) as phrase from technologies
            where exclusions is not null

        ),

        phrase_regexes as (

            select
                phrase,
                list_aggregate(
                    list_transform(
                        string_split(replace(phrase, '-', ' '), ''),
                        lambda ch: case
                            when ch = ' ' then '[\s-]*'
                            when ch <> upper(ch) then '[' || ch || upper(ch) || ']'
                            else ch
                        end
                    ),
                    'string_agg',
                    ''
                ) as phrase_regex

            from phrases
            where phrase <> ''

        ),

        seed_hash as (

            select
                {{ sha256_hex("string_agg(technology_id || '=' || coalesce(synonyms, '') || '/' || coalesce(exclusions, ''), ';' order by technology_id)") }}
                    as hash

            from technologies

        )

        select
            'assistive-tech.v1:' || left((select hash from seed_hash), 12) as version,
            '\b(?:' || string_agg(phrase_regex, '|' order by length(phrase) desc, phrase) || ')(?:[eE]?[sS])?\b' as pattern

        from phrase_regexes
    {%- endset -%}
    {%- set row = run_query(query).rows[0] -%}
    {%- set cue = "(?i:\\b(?:no|not|never|without|instead of|rather than|avoid|avoiding"
        ~ "|(?:do|does|did|is|are|was|were|should|would|wo|need)n['’]?t)\\b)(?:\\s+[\\w'’-]+){0,3}?\\s+" -%}
    {{ return({
        'version': "'" ~ row[0] ~ "'",
        'pattern': "'" ~ (row[1] | replace("'", "''")) ~ "'",
        'negated_pattern': "'" ~ ((cue ~ '(' ~ row[1] ~ ')') | replace("'", "''")) ~ "'",
    }) }}
{%- endmacro %}
