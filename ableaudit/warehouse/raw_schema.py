"""The raw layer, declared once: the DDL, the Arrow schemas landing writes with, and
the columns dbt documents in ``models/staging/__sources.yml`` all come from here.

``python -m ableaudit.warehouse.raw_schema`` rewrites ``__sources.yml``; a test
fails when the file and this declaration disagree.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from ableaudit.warehouse.raw_columns import LANDING_ID, NOW, Column, Table, column
from ableaudit.warehouse.raw_images import IMAGE_TABLES
from ableaudit.warehouse.raw_querysets import QUERYSET_TABLES

TABLES: tuple[Table, ...] = (
    Table(
        "generations",
        "One row per generation, keyed by a content hash of everything that determines it "
        "(unique by the landings, not by an index: ableaudit.warehouse.raw_schema.UNINDEXED_KEYS). "
        "Append-only; an 'error' row is replaced by a later attempt. Column tests live on stg_raw__generations.",
        (
            column(
                "generation_id",
                "varchar",
                "sha256 of everything that determines the answer.",
                True,
            ),
            column("run_id", "varchar", "The audit run (or import) that landed it."),
            column("task", "varchar", "'text' | 'vision'.", True),
            column("target", "varchar", "The target's name in the audit config.", True),
            column("model_id", "varchar", "The model's name in every mart.", True),
            column("backend", "varchar", "transformers | llamacpp | openai | vllm | import.", True),
            column(
                "model_revision",
                "varchar",
                "What answered, as the backend reports it (served checkpoint, API model "
                "version, file digest); the planned fingerprint when the backend reports nothing.",
            ),
            column("adapter", "varchar", "The peft adapter path or id, if any."),
            column("arm", "varchar", "'baseline' or a mitigation arm's name.", True),
            column(
                "query_set",
                "varchar",
                "'ableaudit' | 'accesseval' | a user set; the image set for vision.",
                True,
            ),
            column("query_id", "varchar", "The query (text) or image (vision) id.", True),
            column(
                "domain", "varchar", "The query's domain (text) or the image's category (vision)."
            ),
            column("disability_id", "varchar", "Null for the neutral prompt."),
            column("condition", "varchar", "'neutral' | 'disability'.", True),
            column(
                "prompt_id", "varchar", "The prompt's id in int_prompts / int_vision_prompts.", True
            ),
            column("system_prompt", "varchar", "The arm's system prompt."),
            column("prompt_text", "varchar", "The user message.", True),
            column("temperature", "double", "Sampling temperature."),
            column("top_p", "double", "Nucleus sampling mass."),
            column("max_new_tokens", "integer", "Completion cap in tokens."),
            column("seed", "bigint", "Sampling seed."),
            column("sample_index", "integer", "Which repeated sample of the prompt this is.", True),
            column("decoding_json", "varchar", "Every decoding parameter, canonical JSON."),
            column("status", "varchar", "'ok' | 'empty' | 'error'.", True),
            column("finish_reason", "varchar", "'stop' | 'length' | ... as the engine reports it."),
            column("response_text", "varchar", "The answer; null when status = 'error'."),
            column("error_message", "varchar", "Why the call failed."),
            column("prompt_tokens", "integer", "Tokens of the prompt."),
            column("completion_tokens", "integer", "Tokens of the answer."),
            column("latency_ms", "double", "Wall time of the call."),
            column("source", "varchar", "'generated' | 'imported'.", True),
            column("created_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
    ),
    Table(
        "generation_errors",
        "Every failed generation attempt, kept forever; raw.generations keeps only the latest.",
        (
            column("generation_id", "varchar", "The generation that failed.", True),
            column("run_id", "varchar", "The run of the attempt."),
            column("error_message", "varchar", "Why it failed."),
            column("created_at", "timestamp", "When the attempt landed.", True, NOW),
            LANDING_ID,
        ),
    ),
    Table(
        "generation_history",
        "One row per superseded generation: the landed row an `ableaudit import responses --replace` "
        "replaced with a corrected text, kept as it was so no answer is lost.",
        (
            column("generation_id", "varchar", "The generation whose text was replaced.", True),
            column("run_id", "varchar", "The run (or import) that had landed the old row."),
            column("status", "varchar", "The old row's status.", True),
            column("response_text", "varchar", "The old text."),
            column("source", "varchar", "The old row's source ('generated' | 'imported').", True),
            column("landed_at", "timestamp", "When the old row had landed."),
            column(
                "replaced_by_run_id", "varchar", "The import that replaced it, if it had a run id."
            ),
            column("created_at", "timestamp", "When it was superseded.", True, NOW),
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
            column("query_set", "varchar", "The set's name.", True),
            column("query_id", "varchar", "The query's id within the set.", True),
            column("domain", "varchar", "The query's domain.", True),
            column("persona", "varchar", "The persona phrase as the file gives it."),
            column("disability_id", "varchar", "Null for the neutral query."),
            column("prompt_text", "varchar", "The prompt.", True),
            column("source_file", "varchar", "The file it came from."),
            column("loaded_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
    ),
    Table(
        "judgments",
        "One row per judge verdict (rubric or contrastive), keyed by a content hash of the judge, its prompt "
        "version and the texts judged. An 'error' call is replaced by a later attempt; an 'ok' row is never "
        "replaced. Column tests live on stg_raw__judgments.",
        (
            column(
                "judgment_id",
                "varchar",
                "sha256 of judge model and revision, prompt version, subject texts.",
            ),
            column("judge_kind", "varchar", "'rubric' | 'contrastive'.", True),
            column("judge_name", "varchar", "The judge's name in the config.", True),
            column("judge_model", "varchar", "The judge's model.", True),
            column("judge_revision", "varchar", "What pins the judge's weights."),
            column("prompt_version", "varchar", "Digest of the judge's prompt.", True),
            column("generation_id", "varchar", "Rubric: the response judged."),
            column("neutral_generation_id", "varchar", "Contrastive: response A (neutral)."),
            column(
                "disability_generation_id", "varchar", "Contrastive: response B (disability-aware)."
            ),
            column("subject_hash", "varchar", "sha256 of the texts judged.", True),
            column("raw_output", "varchar", "The judge's own text, verbatim."),
            column("call_status", "varchar", "'ok' | 'error' (the call itself).", True),
            column(
                "parse_status",
                "varchar",
                "'parsed' | 'repaired' | 'unparseable'; null when the call failed.",
            ),
            column("parsed_json", "varchar", "The validated verdict, canonical JSON."),
            column("parse_notes", "varchar", "Why repaired or unparseable; spans not found."),
            column("error_message", "varchar", "Why the call failed."),
            column("source", "varchar", "'judged' | 'imported'.", True),
            column("run_id", "varchar", "The run that landed it."),
            column("created_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("judgment_id",),
    ),
    Table(
        "judge_dimension_sets",
        "The dimension sets of users' own that contrastive verdicts were asked on (docs/judges.md), "
        "one row per prompt version and landing: every landing of such verdicts lands the set with "
        "them, so a verdict never outlives its definition. The built-in set is not landed: every "
        "build knows it (ableaudit.judges.dimensions.catalog).",
        (
            column(
                "prompt_version",
                "varchar",
                "raw.judgments.prompt_version of the verdicts asked on it (contrastive.<set>.<digest>).",
                True,
            ),
            column("dimension_set", "varchar", "The set's name.", True),
            column(
                "definition",
                "varchar",
                "The set as declared and its dimensions as SQL reads them, JSON "
                "(ableaudit.judges.dimensions.definition).",
                True,
            ),
            column("created_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
    ),
    Table(
        "annotations",
        "Human (or other external) ratings landed by `ableaudit import annotations`, one row per item, "
        "dimension and annotator. Column tests live on stg_raw__annotations.",
        (
            column("annotation_id", "varchar", "sha256 of item_id, dimension, annotator_id."),
            column(
                "item_id",
                "varchar",
                "A generation_id (rubric dimensions) or a pair_id (contrastive).",
                True,
            ),
            column("item_kind", "varchar", "'generation' | 'pair'.", True),
            column(
                "dimension",
                "varchar",
                "judge_score | interpret | stereotype | framing | abstain.",
                True,
            ),
            column("annotator_id", "varchar", "Who rated.", True),
            column(
                "value", "varchar", "As given: the normalised label, or the number as text.", True
            ),
            column(
                "value_num", "double", "The numeric value (scores; ordinal position for labels)."
            ),
            column("batch_id", "varchar", "One import (digest of its file)."),
            column("source_file", "varchar", "The file it came from."),
            column("loaded_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("annotation_id",),
    ),
    *IMAGE_TABLES,
    Table(
        "adapters",
        "The registry of trained adapters (LoRA detectors and DPO adapters), one row per adapter. "
        "detector_verdicts reads it to pick var('detector_adapter').",
        (
            column("adapter_id", "varchar", "'<name>-v<version>', e.g. 'detector-v3'."),
            column("kind", "varchar", "'detector' | 'dpo'.", True),
            column("name", "varchar", "The adapter family; versions count up per name.", True),
            column("version", "integer", "1, 2, ... per name.", True),
            column(
                "base_model",
                "varchar",
                "HF id, local path or builtin: name the adapter applies to.",
                True,
            ),
            column("base_fingerprint", "varchar", "What pins the base weights."),
            column("path", "varchar", "The adapter's folder.", True),
            column(
                "data_snapshot",
                "varchar",
                "JSON: sha256 of the training rows, their count, their source.",
                True,
            ),
            column("split_json", "varchar", "JSON: how train and test were split."),
            column(
                "metrics_json",
                "varchar",
                "JSON: held-out metrics (detector) or training log (dpo).",
            ),
            column("params_json", "varchar", "JSON: every training parameter."),
            column("created_at", "timestamp", "When it was registered.", True, NOW),
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
            column(
                "text_hash",
                "varchar",
                "sha256 of the response text (stg_raw__generations.text_hash).",
                True,
            ),
            column(
                "scorer",
                "varchar",
                "The scorer's registered name (ableaudit.scorers.registry).",
                True,
            ),
            column(
                "scorer_version",
                "varchar",
                "The version the scorer wrote (its registry version).",
                True,
            ),
            column("vader_compound", "double", "vader: compound polarity in [-1, 1]."),
            column("word_count", "integer", "verbosity: whitespace-delimited words."),
            column(
                "refusal_rule", "varchar", "refusal: the rule that marks a refusal; null when none."
            ),
            column("regard", "double", "regard: P(positive) - P(negative)."),
            column(
                "score", "double", "A scorer of response_scores_text (e.g. readability): its value."
            ),
            column("p_positive", "double", "regard: P(positive)."),
            column("p_negative", "double", "regard: P(negative)."),
            column("n_tokens", "integer", "regard: tokens of the text."),
            column("max_tokens", "integer", "regard: the classifier's maximum length."),
            column("status", "varchar", "'ok' (regard: also 'truncated').", True),
            column("reason", "varchar", "Why a status is not 'ok'."),
            column("scored_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("text_hash", "scorer", "scorer_version"),
    ),
    *QUERYSET_TABLES,
    Table(
        "runs",
        "One row per audit run, with its config.",
        (
            column("run_id", "varchar", "Prefect flow run id (or a uuid outside Prefect)."),
            column("config_json", "varchar", "The run's config.", True),
            column("started_at", "timestamp", "When it started.", True, NOW),
            column("finished_at", "timestamp", "When it ended."),
            column(
                "status",
                "varchar",
                "'running' | 'completed' | 'failed' | 'interrupted' (found dead by a later run).",
            ),
            column("host", "varchar", "The machine the run's process runs on."),
            column("pid", "integer", "The run's process id on that host."),
            column("heartbeat_at", "timestamp", "When the run last landed something (its lease)."),
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
            column("landing_id", "varchar", "12 hex characters; 'legacy-...' for older rows."),
            column(
                "kind",
                "varchar",
                "'audit' | 'import-responses' | 'import-queries' | 'import-images' | "
                "'import-annotations' | 'import-judgments' | 'judge' | 'adapter' | 'images' | "
                "'score' | 'generations' | 'judgments' | 'queryset-build' | 'queryset-review' | "
                "'view-rating' | 'legacy'.",
                True,
            ),
            column("source", "varchar", "The file or folder read, or the run (e.g. 'run <id>')."),
            column(
                "source_sha256", "varchar", "sha256 of the file's bytes, when the source is a file."
            ),
            column("run_id", "varchar", "The audit (or judge, or import) run, if any."),
            column("started_at", "timestamp", "When its first row landed.", True, NOW),
            column("finished_at", "timestamp", "When it ended; null while running."),
            column(
                "rows_json",
                "varchar",
                "Rows it wrote per raw table, a JSON object (rows it left unchanged are not "
                "counted); 'superseded' counts landed rows it replaced.",
            ),
            column("row_count", "bigint", "Rows it wrote, all tables together."),
            column(
                "status",
                "varchar",
                "'running' | 'landed' | 'failed' | 'interrupted' | 'forgotten'.",
                True,
            ),
            column("forgotten_at", "timestamp", "When `ableaudit forget` removed its rows."),
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
    "judge_dimension_sets": ("'dimension set ' || prompt_version", "created_at"),
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
