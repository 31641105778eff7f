"""The raw layer of the warehouse: the only tables Python writes.

Everything downstream of ``raw.*`` is built by dbt. The DDL lives here, once,
and is applied both by Python (before landing) and by the dbt-duckdb plugin
(when dbt opens a connection), so a plain ``dbt build`` on a fresh file works.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

DEFAULT_WAREHOUSE = "warehouse/ableaudit.duckdb"

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


def connect(path: str | os.PathLike | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; the writer also makes sure the raw layer exists."""
    p = warehouse_path(path)
    if read_only:
        return duckdb.connect(str(p), read_only=True)
    p.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(p))
    ensure_raw_schema(con)
    return con
