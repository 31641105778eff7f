"""Regard per distinct response text and classifier: scored once, retried when unavailable.

Thin wiring: ableaudit.scorers.pending picks the texts (an ibis expression),
ableaudit.scorers.regard scores them. The classifier is var('regard_model')
(default: $ABLEAUDIT_REGARD_MODEL, else sasha/regardv3).
"""

from ableaudit.scorers import regard
from ableaudit.scorers.pending import ibis_connection, pending_texts


def model(dbt, session):
    dbt.config(
        materialized="incremental",
        unique_key=["text_hash", "scorer_version"],
        on_schema_change="fail",
    )
    dbt.ref("stg_raw__generations")  # declares the dependency for dbt's DAG
    model_ref = regard.model_reference(dbt.config.meta_get("regard_model"))
    configured_batch = dbt.config.meta_get("scorer_batch_size")  # alone on its line: dbt parses these calls
    batch_size = int(configured_batch or 32)
    version = regard.scorer_version(model_ref)

    # ibis reads the tables by name; staging models live in this model's schema.
    con = ibis_connection(session)
    where = (dbt.this.database, dbt.this.schema)
    generations = con.table("stg_raw__generations", database=where)
    scored = con.table(dbt.this.identifier, database=where) if dbt.is_incremental else None
    todo = pending_texts(generations, scored, version, retry_statuses=regard.RETRY_STATUSES).to_pyarrow()

    return regard.regard_table(
        todo["text_hash"].to_pylist(),
        todo["response_text"].to_pylist(),
        model_ref,
        batch_size=batch_size,
    )
