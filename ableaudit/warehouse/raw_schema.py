"""The raw layer, declared once: the DDL, the Arrow schemas landing writes with, and
the columns dbt documents in ``models/staging/__sources.yml`` all come from here.

``python -m ableaudit.warehouse.raw_schema`` rewrites ``__sources.yml``; a test
fails when the file and this declaration disagree.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa

_ARROW = {
    "varchar": pa.string(),
    "double": pa.float64(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us"),
}


@dataclass(frozen=True)
class Column:
    name: str
    """The column's name."""
    type: str
    """Its DuckDB type (a key of the Arrow type map)."""
    doc: str
    """What it holds, for the dbt docs."""
    required: bool = False
    """NOT NULL."""
    default: str | None = None
    """A SQL default; a column with one is filled by DuckDB, not by landing."""
    stamped: bool = False
    """Filled by the landing layer itself (``landing_id``), never by the caller's rows."""

    @property
    def arrow(self) -> pa.DataType:
        return _ARROW[self.type]


@dataclass(frozen=True)
class Table:
    name: str
    """The table under the ``raw`` schema."""
    doc: str
    """What one row is, and who lands it."""
    columns: tuple[Column, ...]
    """In DDL order."""
    primary_key: tuple[str, ...] = ()
    """Empty when the key cannot be a primary key (a nullable part), or when its index
    would cost more than it guards (``UNINDEXED_KEYS``)."""
    tests: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """dbt column tests declared on the source: (column, tests)."""

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    def landed(self) -> list[Column]:
        """The columns a caller's rows give (no default, not stamped by the landing layer)."""
        return [c for c in self.columns if c.default is None and not c.stamped]

    def written(self) -> list[Column]:
        """The columns a landing writes: the caller's, and the ones it stamps."""
        return [c for c in self.columns if c.default is None]

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(c.name, c.arrow) for c in self.written()])

    def arrow_columns(self) -> dict[str, pa.DataType]:
        return {c.name: c.arrow for c in self.written()}

    def ddl(self) -> str:
        lines = []
        for c in self.columns:
            line = f"    {c.name} {c.type}"
            if c.required:
                line += " not null"
            if c.default is not None:
                line += f" default {c.default}"
            lines.append(line)
        if self.primary_key:
            lines.append(f"    primary key ({', '.join(self.primary_key)})")
        return f"create table if not exists raw.{self.name} (\n" + ",\n".join(lines) + "\n);"


def _c(
    name: str, type_: str, doc: str, required: bool = False, default: str | None = None
) -> Column:
    return Column(name, type_, doc, required, default)


_NOW = "current_timestamp"

LANDING_ID = Column(
    "landing_id",
    "varchar",
    "The landing that wrote the row (raw.landings); `ableaudit forget` removes a landing's rows.",
    stamped=True,
)

TABLES: tuple[Table, ...] = (
    Table(
        "generations",
        "One row per generation, keyed by a content hash of everything that determines it "
        "(unique by the landings, not by an index: ableaudit.warehouse.raw_schema.UNINDEXED_KEYS). "
        "Append-only; an 'error' row is replaced by a later attempt. Column tests live on stg_raw__generations.",
        (
            _c(
                "generation_id",
                "varchar",
                "sha256 of everything that determines the answer.",
                True,
            ),
            _c("run_id", "varchar", "The audit run (or import) that landed it."),
            _c("task", "varchar", "'text' | 'vision'.", True),
            _c("target", "varchar", "The target's name in the audit config.", True),
            _c("model_id", "varchar", "The model's name in every mart.", True),
            _c("backend", "varchar", "transformers | llamacpp | openai | vllm | import.", True),
            _c(
                "model_revision",
                "varchar",
                "What answered, as the backend reports it (served checkpoint, API model "
                "version, file digest); the planned fingerprint when the backend reports nothing.",
            ),
            _c("adapter", "varchar", "The peft adapter path or id, if any."),
            _c("arm", "varchar", "'baseline' or a mitigation arm's name.", True),
            _c(
                "query_set",
                "varchar",
                "'ableaudit' | 'accesseval' | a user set; the image set for vision.",
                True,
            ),
            _c("query_id", "varchar", "The query (text) or image (vision) id.", True),
            _c("domain", "varchar", "The query's domain (text) or the image's category (vision)."),
            _c("disability_id", "varchar", "Null for the neutral prompt."),
            _c("condition", "varchar", "'neutral' | 'disability'.", True),
            _c(
                "prompt_id", "varchar", "The prompt's id in int_prompts / int_vision_prompts.", True
            ),
            _c("system_prompt", "varchar", "The arm's system prompt."),
            _c("prompt_text", "varchar", "The user message.", True),
            _c("temperature", "double", "Sampling temperature."),
            _c("top_p", "double", "Nucleus sampling mass."),
            _c("max_new_tokens", "integer", "Completion cap in tokens."),
            _c("seed", "bigint", "Sampling seed."),
            _c("sample_index", "integer", "Which repeated sample of the prompt this is.", True),
            _c("decoding_json", "varchar", "Every decoding parameter, canonical JSON."),
            _c("status", "varchar", "'ok' | 'empty' | 'error'.", True),
            _c("finish_reason", "varchar", "'stop' | 'length' | ... as the engine reports it."),
            _c("response_text", "varchar", "The answer; null when status = 'error'."),
            _c("error_message", "varchar", "Why the call failed."),
            _c("prompt_tokens", "integer", "Tokens of the prompt."),
            _c("completion_tokens", "integer", "Tokens of the answer."),
            _c("latency_ms", "double", "Wall time of the call."),
            _c("source", "varchar", "'generated' | 'imported'.", True),
            _c("created_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
    ),
    Table(
        "generation_errors",
        "Every failed generation attempt, kept forever; raw.generations keeps only the latest.",
        (
            _c("generation_id", "varchar", "The generation that failed.", True),
            _c("run_id", "varchar", "The run of the attempt."),
            _c("error_message", "varchar", "Why it failed."),
            _c("created_at", "timestamp", "When the attempt landed.", True, _NOW),
            LANDING_ID,
        ),
    ),
    Table(
        "generation_history",
        "One row per superseded generation: the landed row an `ableaudit import responses --replace` "
        "replaced with a corrected text, kept as it was so no answer is lost.",
        (
            _c("generation_id", "varchar", "The generation whose text was replaced.", True),
            _c("run_id", "varchar", "The run (or import) that had landed the old row."),
            _c("status", "varchar", "The old row's status.", True),
            _c("response_text", "varchar", "The old text."),
            _c("source", "varchar", "The old row's source ('generated' | 'imported').", True),
            _c("landed_at", "timestamp", "When the old row had landed."),
            _c("replaced_by_run_id", "varchar", "The import that replaced it, if it had a run id."),
            _c("created_at", "timestamp", "When it was superseded.", True, _NOW),
            Column(
                "landing_id",
                "varchar",
                "The landing that had landed the old row; forgetting it drops this row too.",
                stamped=True,
            ),
            Column(
                "replaced_by_landing_id",
                "varchar",
                "The landing that superseded it; forgetting that landing puts this row back.",
                stamped=True,
            ),
        ),
    ),
    Table(
        "external_queries",
        "Query sets landed from files (e.g. the published AccessEval CSV), one row per prompt. Unique on "
        "(query_set, query_id, disability_id): a primary key cannot hold the neutral row's null disability, "
        "so the loader replaces a whole query set in one transaction and dbt tests uniqueness downstream.",
        (
            _c("query_set", "varchar", "The set's name.", True),
            _c("query_id", "varchar", "The query's id within the set.", True),
            _c("domain", "varchar", "The query's domain.", True),
            _c("persona", "varchar", "The persona phrase as the file gives it."),
            _c("disability_id", "varchar", "Null for the neutral query."),
            _c("prompt_text", "varchar", "The prompt.", True),
            _c("source_file", "varchar", "The file it came from."),
            _c("loaded_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
    ),
    Table(
        "judgments",
        "One row per judge verdict (rubric or contrastive), keyed by a content hash of the judge, its prompt "
        "version and the texts judged. An 'error' call is replaced by a later attempt; an 'ok' row is never "
        "replaced. Column tests live on stg_raw__judgments.",
        (
            _c(
                "judgment_id",
                "varchar",
                "sha256 of judge model and revision, prompt version, subject texts.",
            ),
            _c("judge_kind", "varchar", "'rubric' | 'contrastive'.", True),
            _c("judge_name", "varchar", "The judge's name in the config.", True),
            _c("judge_model", "varchar", "The judge's model.", True),
            _c("judge_revision", "varchar", "What pins the judge's weights."),
            _c("prompt_version", "varchar", "Digest of the judge's prompt.", True),
            _c("generation_id", "varchar", "Rubric: the response judged."),
            _c("neutral_generation_id", "varchar", "Contrastive: response A (neutral)."),
            _c(
                "disability_generation_id", "varchar", "Contrastive: response B (disability-aware)."
            ),
            _c("subject_hash", "varchar", "sha256 of the texts judged.", True),
            _c("raw_output", "varchar", "The judge's own text, verbatim."),
            _c("call_status", "varchar", "'ok' | 'error' (the call itself).", True),
            _c(
                "parse_status",
                "varchar",
                "'parsed' | 'repaired' | 'unparseable'; null when the call failed.",
            ),
            _c("parsed_json", "varchar", "The validated verdict, canonical JSON."),
            _c("parse_notes", "varchar", "Why repaired or unparseable; spans not found."),
            _c("error_message", "varchar", "Why the call failed."),
            _c("source", "varchar", "'judged' | 'imported'.", True),
            _c("run_id", "varchar", "The run that landed it."),
            _c("created_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("judgment_id",),
    ),
    Table(
        "annotations",
        "Human (or other external) ratings landed by `ableaudit import annotations`, one row per item, "
        "dimension and annotator. Column tests live on stg_raw__annotations.",
        (
            _c("annotation_id", "varchar", "sha256 of item_id, dimension, annotator_id."),
            _c(
                "item_id",
                "varchar",
                "A generation_id (rubric dimensions) or a pair_id (contrastive).",
                True,
            ),
            _c("item_kind", "varchar", "'generation' | 'pair'.", True),
            _c(
                "dimension",
                "varchar",
                "judge_score | interpret | stereotype | framing | abstain.",
                True,
            ),
            _c("annotator_id", "varchar", "Who rated.", True),
            _c("value", "varchar", "As given: the normalised label, or the number as text.", True),
            _c("value_num", "double", "The numeric value (scores; ordinal position for labels)."),
            _c("batch_id", "varchar", "One import (digest of its file)."),
            _c("source_file", "varchar", "The file it came from."),
            _c("loaded_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("annotation_id",),
    ),
    Table(
        "images",
        "The images of vision audits, one row per image set and image id, landed from a PAIRS tree, a "
        "manifest CSV or a COCO annotations file. Column tests live on stg_raw__images.",
        (
            _c("image_set", "varchar", "E.g. 'pairs'; a vision generation's query_set.", True),
            _c(
                "image_id",
                "varchar",
                "A vision generation's query_id (PAIRS: '<category>/<scenario>/<stem>').",
                True,
            ),
            _c(
                "rel_path",
                "varchar",
                "POSIX path under the image root (never absolute, never '..').",
                True,
            ),
            _c(
                "sha256",
                "varchar",
                "Of the file's bytes; part of every vision generation's key.",
                True,
            ),
            _c("width", "integer", "Pixels, from the file header."),
            _c("height", "integer", "Pixels, from the file header."),
            _c(
                "scenario", "varchar", "PAIRS: the scenario folder; never an identity source.", True
            ),
            _c(
                "category",
                "varchar",
                "PAIRS: occupations | status | potential_crime; a generation's domain.",
                True,
            ),
            _c("gender", "varchar", "From the file name (PAIRS) or the manifest.", True),
            _c("race", "varchar", "From the file name (PAIRS) or the manifest.", True),
            _c(
                "extra_json",
                "varchar",
                "Any other identity columns of the manifest; COCO: its image id, license, the "
                "person's area share and the filter settings. Canonical JSON object.",
            ),
            _c("loader", "varchar", "'pairs_tree' | 'manifest' | 'coco'.", True),
            _c("source", "varchar", "The tree root, manifest or annotations file loaded."),
            _c("loaded_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("image_set", "image_id"),
    ),
    Table(
        "image_candidates",
        "Every image a filtering loader considered for an image set (`ableaudit import coco`), kept "
        "or dropped, with the rule that dropped it; landed with the set's raw.images rows, in one "
        "transaction. The image_funnel mart counts them.",
        (
            _c("image_set", "varchar", "The image set the kept images land under.", True),
            _c("candidate_id", "varchar", "The source's own image id (COCO: its image id).", True),
            _c("file_name", "varchar", "The file under the image root the source names."),
            _c("outcome", "varchar", "'kept' | 'dropped'.", True),
            _c(
                "reason",
                "varchar",
                "Why it was dropped: 'no_person' | 'crowd' | 'several_people' | "
                "'person_too_small'; null when kept.",
            ),
            _c("n_people", "integer", "Person annotations that are not crowds."),
            _c("n_crowd", "integer", "Person annotations marked iscrowd."),
            _c(
                "person_area_share",
                "double",
                "The one person's mask area over the image's area; null unless exactly one.",
            ),
            _c("loader", "varchar", "'coco'.", True),
            _c("source", "varchar", "The annotations file read."),
            _c("loaded_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("image_set", "candidate_id"),
    ),
    Table(
        "adapters",
        "The registry of trained adapters (LoRA detectors and DPO adapters), one row per adapter. "
        "detector_verdicts reads it to pick var('detector_adapter').",
        (
            _c("adapter_id", "varchar", "'<name>-v<version>', e.g. 'detector-v3'."),
            _c("kind", "varchar", "'detector' | 'dpo'.", True),
            _c("name", "varchar", "The adapter family; versions count up per name.", True),
            _c("version", "integer", "1, 2, ... per name.", True),
            _c(
                "base_model",
                "varchar",
                "HF id, local path or builtin: name the adapter applies to.",
                True,
            ),
            _c("base_fingerprint", "varchar", "What pins the base weights."),
            _c("path", "varchar", "The adapter's folder.", True),
            _c(
                "data_snapshot",
                "varchar",
                "JSON: sha256 of the training rows, their count, their source.",
                True,
            ),
            _c("split_json", "varchar", "JSON: how train and test were split."),
            _c(
                "metrics_json",
                "varchar",
                "JSON: held-out metrics (detector) or training log (dpo).",
            ),
            _c("params_json", "varchar", "JSON: every training parameter."),
            _c("created_at", "timestamp", "When it was registered.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("adapter_id",),
    ),
    Table(
        "text_scores",
        "Per-text scores computed outside dbt by `ableaudit score` (the scoring flow), one row per "
        "text, scorer and scorer version, with the columns of that scorer's response_scores_* model. "
        "The score models take a text's landed row instead of scoring it again; a text nobody "
        "landed is scored in dbt as before. Only final results land (never 'unavailable' or 'error').",
        (
            _c(
                "text_hash",
                "varchar",
                "sha256 of the response text (stg_raw__generations.text_hash).",
                True,
            ),
            _c(
                "scorer",
                "varchar",
                "The scorer's registered name (ableaudit.scorers.registry).",
                True,
            ),
            _c(
                "scorer_version",
                "varchar",
                "The version the scorer wrote (its registry version).",
                True,
            ),
            _c("vader_compound", "double", "vader: compound polarity in [-1, 1]."),
            _c("word_count", "integer", "verbosity: whitespace-delimited words."),
            _c(
                "refusal_rule", "varchar", "refusal: the rule that marks a refusal; null when none."
            ),
            _c("regard", "double", "regard: P(positive) - P(negative)."),
            _c(
                "score", "double", "A scorer of response_scores_text (e.g. readability): its value."
            ),
            _c("p_positive", "double", "regard: P(positive)."),
            _c("p_negative", "double", "regard: P(negative)."),
            _c("n_tokens", "integer", "regard: tokens of the text."),
            _c("max_tokens", "integer", "regard: the classifier's maximum length."),
            _c("status", "varchar", "'ok' (regard: also 'truncated').", True),
            _c("reason", "varchar", "Why a status is not 'ok'."),
            _c("scored_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("text_hash", "scorer", "scorer_version"),
    ),
    Table(
        "queryset_builds",
        "One row per query set built by `ableaudit queryset build` (NAME@VERSION), with the config "
        "and the generator's provenance; 'published' once its prompts are in raw.external_queries.",
        (
            _c("query_set", "varchar", "NAME@VERSION, the name an audit's `query_set:` gives."),
            _c("name", "varchar", "The set's name.", True),
            _c("version", "varchar", "The set's version.", True),
            _c("config_json", "varchar", "The build config (URL credentials stripped).", True),
            _c("generator_model", "varchar", "The generator's model.", True),
            _c("generator_revision", "varchar", "What pins the generator's weights.", True),
            _c("backend", "varchar", "The generator's backend.", True),
            _c("prompt_version", "varchar", "Digest of the pipeline's prompts.", True),
            _c("seed", "bigint", "The generator's sampling seed."),
            _c("status", "varchar", "'validated' | 'published'.", True),
            _c("published_at", "timestamp", "When its prompts were published."),
            _c("created_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("query_set",),
    ),
    Table(
        "queryset_domains",
        "The domains a built query set covers, one row per set and domain, as its config gives them.",
        (
            _c("query_set", "varchar", "NAME@VERSION.", True),
            _c("domain_id", "varchar", "The domain's id (a prompt's domain).", True),
            _c("description", "varchar", "What the domain is, as the config says.", True),
            _c("created_at", "timestamp", "When it landed.", True, _NOW),
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
            _c(
                "generation_id",
                "varchar",
                "sha256 of generator, prompt version, messages, decoding.",
            ),
            _c("query_set", "varchar", "The build that first asked for it (NAME@VERSION).", True),
            _c("stage", "varchar", "'personas' | 'queries' | 'leakage_check'.", True),
            _c("domain", "varchar", "The domain asked about.", True),
            _c("persona_id", "varchar", "The persona a query or check is for."),
            _c("generator_model", "varchar", "The generator's model.", True),
            _c("generator_revision", "varchar", "What answered, as the backend reports it."),
            _c("backend", "varchar", "The generator's backend.", True),
            _c("prompt_version", "varchar", "Digest of the stage's prompt.", True),
            _c("seed", "bigint", "Sampling seed."),
            _c("temperature", "double", "Sampling temperature."),
            _c("max_new_tokens", "integer", "Completion cap in tokens."),
            _c(
                "structured",
                "boolean",
                "Whether the output was constrained to a JSON schema.",
                True,
            ),
            _c("prompt_text", "varchar", "The user message.", True),
            _c("status", "varchar", "'ok' | 'empty' | 'error'.", True),
            _c("response_text", "varchar", "The generator's text; null on error."),
            _c("error_message", "varchar", "Why the call failed."),
            _c("created_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("generation_id",),
    ),
    Table(
        "queryset_candidates",
        "One row per candidate persona or query of a built set and what validation decided: kept, "
        "or removed with its reason. Replaced per set on every build (identical rows stay).",
        (
            _c("query_set", "varchar", "NAME@VERSION.", True),
            _c("stage", "varchar", "'personas' | 'queries'.", True),
            _c("candidate_id", "varchar", "The persona's or query's id within the set.", True),
            _c("domain", "varchar", "The domain.", True),
            _c("persona_id", "varchar", "The persona (a query's; a persona's own id)."),
            _c("persona", "varchar", "The persona's role."),
            _c("persona_description", "varchar", "The persona's description."),
            _c("neutral_query", "varchar", "Queries: the neutral query."),
            _c("disability_template", "varchar", "Queries: the template with its placeholder."),
            _c("origin", "varchar", "'generated' | 'config' (a seed persona).", True),
            _c("generation_id", "varchar", "The generator call it came from."),
            _c("decision", "varchar", "'kept' | 'removed'.", True),
            _c(
                "reason",
                "varchar",
                "Why removed: unparseable | empty | generic | off_domain | leakage | "
                "leakage_llm | near_duplicate | placeholder_missing | placeholder_multiple | "
                "placeholder_in_neutral. Null when kept.",
            ),
            _c("detail", "varchar", "The evidence: the term found, the near twin and similarity."),
            _c("created_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("query_set", "stage", "candidate_id"),
    ),
    Table(
        "queryset_reviews",
        "A reviewer's decision on each query of a built set, landed by `ableaudit queryset "
        "import-review` all or nothing: accept, reject, or edit (with the edited texts).",
        (
            _c("query_set", "varchar", "NAME@VERSION.", True),
            _c("candidate_id", "varchar", "The query reviewed.", True),
            _c("decision", "varchar", "'accept' | 'reject' | 'edit'.", True),
            _c("neutral_query", "varchar", "The neutral query as published (edited or not)."),
            _c("disability_template", "varchar", "The template as published (edited or not)."),
            _c("reviewer", "varchar", "Who reviewed, as the sheet says."),
            _c("note", "varchar", "The reviewer's note."),
            _c("source_file", "varchar", "The review sheet."),
            _c("created_at", "timestamp", "When it landed.", True, _NOW),
            LANDING_ID,
        ),
        primary_key=("query_set", "candidate_id"),
    ),
    Table(
        "runs",
        "One row per audit run, with its config.",
        (
            _c("run_id", "varchar", "Prefect flow run id (or a uuid outside Prefect)."),
            _c("config_json", "varchar", "The run's config.", True),
            _c("started_at", "timestamp", "When it started.", True, _NOW),
            _c("finished_at", "timestamp", "When it ended."),
            _c(
                "status",
                "varchar",
                "'running' | 'completed' | 'failed' | 'interrupted' (found dead by a later run).",
            ),
            _c("host", "varchar", "The machine the run's process runs on."),
            _c("pid", "integer", "The run's process id on that host."),
            _c("heartbeat_at", "timestamp", "When the run last landed something (its lease)."),
            LANDING_ID,
        ),
        primary_key=("run_id",),
        tests=(("run_id", ("unique", "not_null")),),
    ),
    Table(
        "landings",
        "One row per landing: every call that wrote raw.* (an audit run, an import, a judge run, an "
        "adapter registered), with where its rows came from and how many it wrote. Every other raw "
        "table's landing_id points here. `ableaudit history` lists it; `ableaudit forget` removes a "
        "landing's rows and marks it 'forgotten' (the row stays). Rows landed before landings were "
        "recorded belong to 'legacy-...' landings, one per run or per write.",
        (
            _c("landing_id", "varchar", "12 hex characters; 'legacy-...' for older rows."),
            _c(
                "kind",
                "varchar",
                "'audit' | 'import-responses' | 'import-queries' | 'import-images' | "
                "'import-annotations' | 'import-judgments' | 'judge' | 'adapter' | 'images' | "
                "'score' | 'generations' | 'judgments' | 'queryset-build' | 'queryset-review' | "
                "'legacy'.",
                True,
            ),
            _c("source", "varchar", "The file or folder read, or the run (e.g. 'run <id>')."),
            _c(
                "source_sha256", "varchar", "sha256 of the file's bytes, when the source is a file."
            ),
            _c("run_id", "varchar", "The audit (or judge, or import) run, if any."),
            _c("started_at", "timestamp", "When its first row landed.", True, _NOW),
            _c("finished_at", "timestamp", "When it ended; null while running."),
            _c(
                "rows_json",
                "varchar",
                "Rows it wrote per raw table, a JSON object (rows it left unchanged are not "
                "counted); 'superseded' counts landed rows it replaced.",
            ),
            _c("row_count", "bigint", "Rows it wrote, all tables together."),
            _c(
                "status",
                "varchar",
                "'running' | 'landed' | 'failed' | 'interrupted' | 'forgotten'.",
                True,
            ),
            _c("forgotten_at", "timestamp", "When `ableaudit forget` removed its rows."),
        ),
        primary_key=("landing_id",),
        tests=(("landing_id", ("unique", "not_null")),),
    ),
)

BY_NAME = {t.name: t for t in TABLES}

STAMPED: tuple[Table, ...] = tuple(t for t in TABLES if t.name != "landings")
"""The tables whose rows carry the landing that wrote them."""


def table(name: str) -> Table:
    return BY_NAME[name]


def ddl() -> str:
    """Every raw table, created when missing (idempotent)."""
    return "create schema if not exists raw;\n\n" + "\n\n".join(t.ddl() for t in TABLES) + "\n"


UNINDEXED_KEYS = frozenset({"generations"})
"""The raw tables whose key the landings keep unique themselves, with no primary key: each
write inserts only the keys not landed yet, in its transaction, one writer at a time
(``landing``), and dbt's ``unique`` test of the staging model checks it on every build. The
index of 64 hexadecimal characters per generation was 60% of raw.generations on disk and 40%
of an import's time (docs/benchmarks.md, "Batches prepared on every core, and
raw.generations without a primary key")."""


def unindexing(indexed: set[str]) -> list[str]:
    """Statements that rebuild without its primary key each table of ``UNINDEXED_KEYS`` an
    older warehouse holds with one (``indexed``: the raw tables that have a primary key):
    DuckDB cannot drop a primary key, so the rows move to a table made anew, in one
    transaction with the column migrations."""
    out = []
    for t in TABLES:
        if t.name not in UNINDEXED_KEYS or t.name not in indexed:
            continue
        rebuilt = f"{t.name}__rebuilt"
        cols = ", ".join(c.name for c in t.columns)
        out += [
            f"drop table if exists raw.{rebuilt}",
            replace(t, name=rebuilt).ddl(),
            f"insert into raw.{rebuilt} ({cols}) select {cols} from raw.{t.name}",
            f"drop table raw.{t.name}",
            f"alter table raw.{rebuilt} rename to {t.name}",
        ]
    return out


def migrations(existing: set[tuple[str, str]]) -> list[str]:
    """``alter table`` statements that add the declared columns an existing table lacks
    (``existing``: its (table, column) pairs). Added columns are nullable: old rows have no value."""
    present = {t for t, _ in existing}
    out = []
    stamped = []
    for t in TABLES:
        if t.name not in present:
            continue
        for c in t.columns:
            if (t.name, c.name) not in existing:
                default = f" default {c.default}" if c.default is not None else ""
                out.append(f"alter table raw.{t.name} add column {c.name} {c.type}{default}")
                if c.name == "landing_id" and t.name != "landings":
                    stamped.append(t.name)
    if stamped:
        out += legacy_landings(stamped)
    return out


# How rows landed before landing ids were recorded are grouped into landings: by run where the
# row names one, else by the time of the write (every row of one transaction has the same time).
_LEGACY_GROUPS: dict[str, tuple[str, str]] = {
    # table: (the group, as the landing's source; the time column)
    "generations": (
        "coalesce('run ' || run_id, 'generations landed at ' || created_at)",
        "created_at",
    ),
    "generation_errors": (
        "coalesce('run ' || run_id, 'generations landed at ' || created_at)",
        "created_at",
    ),
    "generation_history": (
        "coalesce('run ' || run_id, 'generations landed at ' || landed_at)",
        "landed_at",
    ),
    "judgments": ("coalesce('run ' || run_id, 'judgments landed at ' || created_at)", "created_at"),
    "external_queries": ("'query set ' || query_set || ' landed at ' || loaded_at", "loaded_at"),
    "annotations": ("'annotations ' || coalesce(batch_id, 'landed at ' || loaded_at)", "loaded_at"),
    "images": ("'image set ' || image_set || ' landed at ' || loaded_at", "loaded_at"),
    "image_candidates": ("'image set ' || image_set || ' landed at ' || loaded_at", "loaded_at"),
    "adapters": ("'adapter ' || adapter_id", "created_at"),
    "runs": ("'run ' || run_id", "started_at"),
    "text_scores": ("'text scores landed at ' || scored_at", "scored_at"),
    "queryset_builds": ("'query set ' || query_set", "created_at"),
    "queryset_domains": ("'query set ' || query_set", "created_at"),
    "queryset_generations": ("'query set ' || query_set", "created_at"),
    "queryset_candidates": ("'query set ' || query_set", "created_at"),
    "queryset_reviews": ("'review of ' || query_set", "created_at"),
}


def _legacy_id(group: str) -> str:
    return f"'legacy-' || left(sha256({group}), 10)"


def legacy_landings(tables: list[str]) -> list[str]:
    """Statements that give rows landed before landing ids were recorded a 'legacy-...' landing:
    one per audit run (its generations, verdicts and run row together), else one per write, so
    `ableaudit forget` can remove an old mistake without removing everything older."""
    out = []
    for name in tables:
        group, _ = _LEGACY_GROUPS[name]
        out.append(
            f"update raw.{name} set landing_id = {_legacy_id(group)} where landing_id is null"
        )
    if "generation_history" in tables:
        replaced_by = (
            "coalesce('run ' || replaced_by_run_id, 'generations landed at ' || created_at)"
        )
        out.append(
            f"update raw.generation_history set replaced_by_landing_id = {_legacy_id(replaced_by)} "
            "where replaced_by_landing_id is null"
        )
    counted = [n for n in tables if n != "generation_history"]
    per_table = " union all ".join(
        f"select landing_id, '{n}' as tbl, any_value({_LEGACY_GROUPS[n][0]}) as grp, "
        f"any_value({'run_id' if 'run_id' in {c.name for c in table(n).columns} else 'null'}) as run_id, "
        f"count(*) as n, min({_LEGACY_GROUPS[n][1]}) as first_at, max({_LEGACY_GROUPS[n][1]}) as last_at "
        f"from raw.{n} where landing_id like 'legacy-%' group by landing_id"
        for n in counted
    )
    out.append(
        "insert into raw.landings (landing_id, kind, source, run_id, started_at, finished_at, "
        "rows_json, row_count, status) "
        "select landing_id, 'legacy', any_value(grp), any_value(run_id), min(first_at), max(last_at), "
        "cast(json_group_object(tbl, n) as varchar), sum(n), 'landed' "
        f"from ({per_table}) group by landing_id on conflict (landing_id) do nothing"
    )
    return out


def sources_yml() -> str:
    """``models/staging/__sources.yml``, generated: every raw table and column with its description."""
    import yaml

    tables = []
    for t in TABLES:
        tests = dict(t.tests)
        columns = []
        for c in t.columns:
            col: dict = {"name": c.name, "description": c.doc, "data_type": c.type}
            if c.name in tests:
                col["data_tests"] = list(tests[c.name])
            columns.append(col)
        tables.append({"name": t.name, "description": t.doc, "columns": columns})
    doc = {
        "version": 2,
        "sources": [
            {
                "name": "raw",
                "description": "The only tables Python writes, through ableaudit.warehouse.landing. Created by the "
                "dbt-duckdb plugin when dbt connects, so a fresh warehouse builds.",
                "schema": "raw",
                "tables": tables,
            }
        ],
    }
    header = "# Generated from ableaudit/warehouse/raw_schema.py: python -m ableaudit.warehouse.raw_schema\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)


SOURCES_PATH = Path("models") / "staging" / "__sources.yml"


def main(argv: list[str] | None = None) -> int:
    from ableaudit import PROJECT_ROOT

    out = PROJECT_ROOT / SOURCES_PATH
    out.write_text(sources_yml())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
