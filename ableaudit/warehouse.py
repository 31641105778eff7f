"""The raw layer of the warehouse: the only tables Python writes.

Everything downstream of ``raw.*`` is built by dbt. The DDL lives here, once,
and is applied both by Python (before landing) and by the dbt-duckdb plugin
(when dbt opens a connection), so a plain ``dbt build`` on a fresh file works.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import duckdb

DEFAULT_WAREHOUSE = "warehouse/ableaudit.duckdb"

# Threads of one process (targets generating in parallel) share one DuckDB database;
# their writes to raw.* take turns, so two landings or two DDL runs never conflict.
WRITE_LOCK = threading.RLock()

RAW_DDL = """
create schema if not exists raw;

create table if not exists raw.generations (
    generation_id     varchar primary key,  -- sha256 of everything that determines it
    run_id            varchar,              -- the audit run that landed it
    task              varchar not null,     -- 'text' | 'vision'
    target            varchar not null,     -- target name from the audit config
    model_id          varchar not null,     -- model name used in every mart
    backend           varchar not null,     -- transformers | llamacpp | openai | vllm | import
    model_revision    varchar,
    adapter           varchar,              -- peft adapter path/id, if any
    arm               varchar not null,     -- 'baseline' or a mitigation arm name
    query_set         varchar not null,     -- 'ableaudit' | 'accesseval' | user set
    query_id          varchar not null,
    domain            varchar,
    disability_id     varchar,              -- null for the neutral prompt
    condition         varchar not null,     -- 'neutral' | 'disability'
    prompt_id         varchar not null,     -- from int_prompts
    system_prompt     varchar,
    prompt_text       varchar not null,
    temperature       double,
    top_p             double,
    max_new_tokens    integer,
    seed              bigint,
    sample_index      integer not null,
    decoding_json     varchar,              -- every decoding parameter, canonical JSON
    status            varchar not null,     -- 'ok' | 'empty' | 'error'
    finish_reason     varchar,              -- 'stop' | 'length' | ...
    response_text     varchar,              -- null when status = 'error'
    error_message     varchar,
    prompt_tokens     integer,
    completion_tokens integer,
    latency_ms        double,
    source            varchar not null,     -- 'generated' | 'imported'
    created_at        timestamp not null default current_timestamp
);

create table if not exists raw.generation_errors (
    -- every failed attempt, kept forever; raw.generations keeps only the latest
    generation_id varchar not null,
    run_id        varchar,
    error_message varchar,
    created_at    timestamp not null default current_timestamp
);

create table if not exists raw.external_queries (
    -- query sets landed from files (e.g. the published AccessEval CSV)
    query_set     varchar not null,
    query_id      varchar not null,
    domain        varchar not null,
    persona       varchar,
    disability_id varchar,                  -- null for the neutral query
    prompt_text   varchar not null,
    source_file   varchar,
    loaded_at     timestamp not null default current_timestamp
    -- unique on (query_set, query_id, disability_id): a primary key cannot hold the
    -- neutral row's null disability, so the loader replaces a whole query_set in one
    -- transaction and dbt tests uniqueness in stg_external__queries
);

create table if not exists raw.judgments (
    judgment_id      varchar primary key,   -- sha256 of judge model+revision, prompt version, subject texts
    judge_kind       varchar not null,      -- 'rubric' | 'contrastive'
    judge_name       varchar not null,      -- the judge's name in the config
    judge_model      varchar not null,
    judge_revision   varchar,
    prompt_version   varchar not null,
    generation_id    varchar,               -- rubric: the response judged
    neutral_generation_id    varchar,       -- contrastive: response A
    disability_generation_id varchar,       -- contrastive: response B
    subject_hash     varchar not null,      -- sha256 of the texts judged
    raw_output       varchar,               -- the judge's own text, verbatim
    call_status      varchar not null,      -- 'ok' | 'error' (the call itself)
    parse_status     varchar,               -- 'parsed' | 'repaired' | 'unparseable' (null when call_status = 'error')
    parsed_json      varchar,               -- the validated verdict, canonical JSON
    parse_notes      varchar,               -- why repaired / unparseable, spans not found
    error_message    varchar,
    source           varchar not null,      -- 'judged' | 'imported'
    run_id           varchar,
    created_at       timestamp not null default current_timestamp
);

create table if not exists raw.annotations (
    -- human (or other external) ratings, landed by `ableaudit import annotations`
    annotation_id varchar primary key,      -- sha256 of item_id, dimension, annotator_id
    item_id       varchar not null,         -- a generation_id (rubric dimensions) or a pair_id (contrastive)
    item_kind     varchar not null,         -- 'generation' | 'pair'
    dimension     varchar not null,         -- judge_score | interpret | stereotype | framing | abstain
    annotator_id  varchar not null,
    value         varchar not null,         -- as given, normalised label or number as text
    value_num     double,                   -- numeric value (scores; ordinal position for labels)
    batch_id      varchar,                  -- one import
    source_file   varchar,
    loaded_at     timestamp not null default current_timestamp
);

create table if not exists raw.images (
    -- the images a vision audit describes, landed by ableaudit.images (PAIRS tree or manifest CSV)
    image_set   varchar not null,           -- e.g. 'pairs'; a generation's query_set
    image_id    varchar not null,           -- a generation's query_id (PAIRS: '<category>/<scenario>/<file stem>')
    rel_path    varchar not null,           -- POSIX path under the image root (never absolute, never '..')
    sha256      varchar not null,           -- of the file's bytes; part of every vision generation's key
    width       integer,                    -- pixels, from the file header
    height      integer,
    scenario    varchar not null,           -- PAIRS: the scenario folder (e.g. 'black_apron'); never an identity source
    category    varchar not null,           -- PAIRS: occupations | status | potential_crime; a generation's domain
    gender      varchar not null,           -- identity columns: from the file name (PAIRS) or the manifest
    race        varchar not null,
    extra_json  varchar,                    -- any other identity columns of the manifest, canonical JSON object
    loader      varchar not null,           -- 'pairs_tree' | 'manifest'
    source      varchar,                    -- the tree root or manifest file loaded
    loaded_at   timestamp not null default current_timestamp,
    primary key (image_set, image_id)
);

create table if not exists raw.adapters (
    -- trained adapters (LoRA detectors, DPO adapters), registered by ableaudit.detector.registry
    adapter_id       varchar primary key,   -- '<name>-v<version>', e.g. 'detector-v3'
    kind             varchar not null,      -- 'detector' | 'dpo'
    name             varchar not null,      -- the adapter family; versions count up per name
    version          integer not null,
    base_model       varchar not null,      -- HF id, local path or builtin: name the adapter applies to
    base_fingerprint varchar,               -- what pins the base weights (keys.model_fingerprint)
    path             varchar not null,      -- the adapter's folder (peft save_pretrained + ableaudit files)
    data_snapshot    varchar not null,      -- JSON: sha256 of the training rows, their count, their source
    split_json       varchar,               -- JSON: how train and test were split (groups, seed, sizes)
    metrics_json     varchar,               -- JSON: held-out metrics (detector) or training log (dpo)
    params_json      varchar,               -- JSON: every training parameter
    created_at       timestamp not null default current_timestamp
);

create table if not exists raw.runs (
    run_id      varchar primary key,
    config_json varchar not null,
    started_at  timestamp not null default current_timestamp,
    finished_at timestamp,
    status      varchar
);
"""


def warehouse_path(path: str | os.PathLike | None = None) -> Path:
    """Resolve the warehouse file: explicit path, then ABLEAUDIT_WAREHOUSE, then the default."""
    chosen = path or os.environ.get("ABLEAUDIT_WAREHOUSE") or DEFAULT_WAREHOUSE
    return Path(chosen).expanduser().resolve()


def ensure_raw_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the raw tables if they are missing (idempotent)."""
    con.execute(RAW_DDL)


def connect(
    path: str | os.PathLike | None = None, read_only: bool = False, wait_s: float = 120.0
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; the writer also makes sure the raw layer exists.

    DuckDB lets one process hold the file. Another process holding it (a dbt run,
    a BI tool reading the live file by mistake) makes us wait and retry, up to
    `wait_s`, rather than fail an audit midway; then the error says who to stop.
    """
    p = warehouse_path(path)
    if not read_only:
        p.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    delay = 0.1
    while True:
        try:
            con = duckdb.connect(str(p), read_only=read_only)
            break
        except duckdb.IOException as err:
            if "lock" not in str(err).lower() or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the warehouse {p} is held by another process ({err}). Close other DuckDB "
                    "clients of this file (BI tools must read the published copy, see README)"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    if not read_only:
        with WRITE_LOCK:
            ensure_raw_schema(con)
    return con
