"""Mart `detector_verdicts`: the chosen LoRA detector applied to every pair of int_pairs.

Thin wiring over ableaudit.adapters.detector.infer; the pairs and their texts
come from int_pair_texts. The adapter is var('detector_adapter'):
an adapter_id of raw.adapters, 'latest' (the newest detector, the default), or
'' / 'none' (no detector). Incremental on (pair_id, adapter_id): a pair is
scored once per adapter and pair of generations; rows whose status is not final
(no_adapter, incomplete_pair, error) are tried again by the next build.
"""

from ableaudit.adapters.detector.infer import (
    FINAL_STATUSES,
    PAIR_COLUMNS,
    verdict_table,
)
from ableaudit.adapters.registry import list_adapters, resolve_adapter
from ableaudit.warehouse import ibis_compat


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

    raw_con = getattr(session, "_cursor", session)
    adapter = resolve_adapter(list_adapters(con=raw_con, kind="detector"), choice, "detector")
    reason = None
    if adapter is None:
        reason = (
            "var detector_adapter is empty: no detector chosen"
            if (choice or "").strip().lower() in ("", "none")
            else "no detector adapter registered; run the train-detector flow"
        )

    con = ibis_compat.from_connection(raw_con)
    where = (dbt.this.database, dbt.this.schema)
    texts = con.table("int_pair_texts", database=where)
    pairs = texts.select(
        *(c for c in PAIR_COLUMNS if c not in ("response_a", "response_b")),
        response_a=texts.neutral_response_text,
        response_b=texts.disability_response_text,
    )
    columns = pairs.columns
    if adapter is not None and dbt.is_incremental:
        this = con.table(dbt.this.identifier, database=where)
        done = this.filter(
            (this.adapter_id == adapter.adapter_id) & this.status.isin(list(FINAL_STATUSES))
        )
        done = done.select(
            d_pair_id=done.pair_id,
            d_neutral=done.neutral_generation_id,
            d_disability=done.disability_generation_id,
        )
        pairs = pairs.anti_join(
            done,
            [
                pairs.pair_id == done.d_pair_id,
                pairs.neutral_generation_id.identical_to(done.d_neutral),
                pairs.disability_generation_id == done.d_disability,
            ],
        ).select(*columns)
    rows = pairs.order_by("pair_id").to_pyarrow().to_pylist()
    return verdict_table(rows, adapter, batch_size=batch_size, no_adapter_reason=reason)
