"""The query-set tables of the raw layer: a build of a query set, its domains, the generator's
calls, the candidates and the review. Part of ``raw_schema.TABLES``, the one declaration of the raw layer.
"""

from __future__ import annotations

from ableaudit.warehouse.raw_columns import LANDING_ID, NOW, Table, column

QUERYSET_TABLES: tuple[Table, ...] = (
    Table(
        "queryset_builds",
        "One row per query set built by `ableaudit queryset build` (NAME@VERSION), with the config "
        "and the generator's provenance; 'published' once its prompts are in raw.external_queries.",
        (
            column("query_set", "varchar", "NAME@VERSION, the name an audit's `query_set:` gives."),
            column("name", "varchar", "The set's name.", True),
            column("version", "varchar", "The set's version.", True),
            column("config_json", "varchar", "The build config (URL credentials stripped).", True),
            column("generator_model", "varchar", "The generator's model.", True),
            column("generator_revision", "varchar", "What pins the generator's weights.", True),
            column("backend", "varchar", "The generator's backend.", True),
            column("prompt_version", "varchar", "Digest of the pipeline's prompts.", True),
            column("seed", "bigint", "The generator's sampling seed."),
            column("status", "varchar", "'validated' | 'published'.", True),
            column("published_at", "timestamp", "When its prompts were published."),
            column("created_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("query_set",),
    ),
    Table(
        "queryset_domains",
        "The domains a built query set covers, one row per set and domain, as its config gives them.",
        (
            column("query_set", "varchar", "NAME@VERSION.", True),
            column("domain_id", "varchar", "The domain's id (a prompt's domain).", True),
            column("description", "varchar", "What the domain is, as the config says.", True),
            column("created_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("query_set", "domain_id"),
    ),
    Table(
        "queryset_generations",
        "One row per generator call of the query-set pipeline (personas of a domain, queries of a "
        "persona, a leakage check), keyed by a content hash of everything that determines it; an "
        "'error' row is replaced by a later attempt, anything else is never asked again.",
        (
            column(
                "generation_id",
                "varchar",
                "sha256 of generator, prompt version, messages, decoding.",
            ),
            column(
                "query_set", "varchar", "The build that first asked for it (NAME@VERSION).", True
            ),
            column("stage", "varchar", "'personas' | 'queries' | 'leakage_check'.", True),
            column("domain", "varchar", "The domain asked about.", True),
            column("persona_id", "varchar", "The persona a query or check is for."),
            column("generator_model", "varchar", "The generator's model.", True),
            column("generator_revision", "varchar", "What answered, as the backend reports it."),
            column("backend", "varchar", "The generator's backend.", True),
            column("prompt_version", "varchar", "Digest of the stage's prompt.", True),
            column("seed", "bigint", "Sampling seed."),
            column("temperature", "double", "Sampling temperature."),
            column("max_new_tokens", "integer", "Completion cap in tokens."),
            column(
                "structured",
                "boolean",
                "Whether the output was constrained to a JSON schema.",
                True,
            ),
            column("prompt_text", "varchar", "The user message.", True),
            column("status", "varchar", "'ok' | 'empty' | 'error'.", True),
            column("response_text", "varchar", "The generator's text; null on error."),
            column("error_message", "varchar", "Why the call failed."),
            column("created_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("generation_id",),
    ),
    Table(
        "queryset_candidates",
        "One row per candidate persona or query of a built set and what validation decided: kept, "
        "or removed with its reason. Replaced per set on every build (identical rows stay).",
        (
            column("query_set", "varchar", "NAME@VERSION.", True),
            column("stage", "varchar", "'personas' | 'queries'.", True),
            column("candidate_id", "varchar", "The persona's or query's id within the set.", True),
            column("domain", "varchar", "The domain.", True),
            column("persona_id", "varchar", "The persona (a query's; a persona's own id)."),
            column("persona", "varchar", "The persona's role."),
            column("persona_description", "varchar", "The persona's description."),
            column("neutral_query", "varchar", "Queries: the neutral query."),
            column("disability_template", "varchar", "Queries: the template with its placeholder."),
            column("origin", "varchar", "'generated' | 'config' (a seed persona).", True),
            column("generation_id", "varchar", "The generator call it came from."),
            column("decision", "varchar", "'kept' | 'removed'.", True),
            column(
                "reason",
                "varchar",
                "Why removed: unparseable | empty | generic | off_domain | leakage | "
                "leakage_llm | near_duplicate | placeholder_missing | placeholder_multiple | "
                "placeholder_in_neutral. Null when kept.",
            ),
            column(
                "detail", "varchar", "The evidence: the term found, the near twin and similarity."
            ),
            column("created_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("query_set", "stage", "candidate_id"),
    ),
    Table(
        "queryset_reviews",
        "A reviewer's decision on each query of a built set, landed by `ableaudit queryset "
        "import-review` all or nothing: accept, reject, or edit (with the edited texts).",
        (
            column("query_set", "varchar", "NAME@VERSION.", True),
            column("candidate_id", "varchar", "The query reviewed.", True),
            column("decision", "varchar", "'accept' | 'reject' | 'edit'.", True),
            column("neutral_query", "varchar", "The neutral query as published (edited or not)."),
            column("disability_template", "varchar", "The template as published (edited or not)."),
            column("reviewer", "varchar", "Who reviewed, as the sheet says."),
            column("note", "varchar", "The reviewer's note."),
            column("source_file", "varchar", "The review sheet."),
            column("created_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("query_set", "candidate_id"),
    ),
)
