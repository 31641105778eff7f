"""Mart `detector_verdicts`: the chosen LoRA detector applied to every pair of int_pairs.

Thin wiring over ableaudit.adapters.detector.infer; the pairs and their texts
come from int_pair_texts. The adapter is var('detector_adapter'):
an adapter_id of raw.adapters, 'latest' (the newest detector, the default), or
'' / 'none' (no detector). Incremental on (pair_id, adapter_id): a pair is
scored once per adapter and pair of generations; rows whose status is not final
(incomplete_pair, error) are tried again by the next build.

Without a detector nothing is read: the model writes one row (adapter_id
'none', status 'no_adapter', no pair_id) saying why, in milliseconds. With one,
the pairs to score stream from DuckDB in chunks of PAIRS_PER_CHUNK, each
scored and turned into rows before the next is read.
"""

import pyarrow as pa

from ableaudit.adapters.detector.infer import (
    FINAL_STATUSES,
    PAIR_COLUMNS,
    SCHEMA,
    no_adapter_table,
    verdict_batches,
)
from ableaudit.adapters.registry import list_adapters, resolve_adapter

PAIRS_PER_CHUNK = 4096


def model(dbt, session):
    dbt.config(
        materialized="incremental",
        unique_key=["pair_id", "adapter_id"],
        on_schema_change="fail",
    )
    dbt.ref("int_pair_texts")  # declares the dependency for dbt's DAG
    choice = dbt.config.meta_get("detector_adapter")
    configured_batch = dbt.config.meta_get(
        "detector_batch_size"
    )  # alone on its line: dbt parses these calls
    batch_size = int(configured_batch or 64)

    # the build's own connection (dbt passes it as `session`) reads the registry
    adapter = resolve_adapter(list_adapters(con=session, kind="detector"), choice, "detector")
    if adapter is None:
        return no_adapter_table(
            "var detector_adapter is empty: no detector chosen"
            if (choice or "").strip().lower() in ("", "none")
            else "no detector adapter registered; run the train-detector flow"
        )

    texts = dbt.ref("int_pair_texts").set_alias("t")
    if dbt.is_incremental:
        # pairs already scored for good by this adapter, with the same generations, are skipped
        done = session.query(
            f"select pair_id, neutral_generation_id, disability_generation_id from {dbt.this} "
            f"where adapter_id = '{adapter.adapter_id}' "
            f"and status in ({', '.join(repr(s) for s in FINAL_STATUSES)})"
        ).set_alias("d")
        texts = texts.join(
            done,
            "t.pair_id = d.pair_id "
            "and t.neutral_generation_id is not distinct from d.neutral_generation_id "
            "and t.disability_generation_id = d.disability_generation_id",
            how="anti",
        )
    columns = [c for c in PAIR_COLUMNS if c not in ("response_a", "response_b")]
    pairs = texts.project(
        ", ".join(columns) + ", neutral_response_text as response_a, "
        "disability_response_text as response_b"
    ).order("pair_id")
    # read to the end before returning: dbt then runs its own statements on this connection
    batches = list(
        verdict_batches(pairs.to_arrow_reader(PAIRS_PER_CHUNK), adapter, batch_size=batch_size)
    )
    return pa.Table.from_batches(batches, schema=SCHEMA)
