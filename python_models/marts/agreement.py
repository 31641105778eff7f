"""Mart `agreement`: how well two raters agree, for every pair of raters and dimension.

Thin wiring over ableaudit.stats.pairwise_agreement on int_ratings: humans,
LLM judges and (later) detectors, on the items both rated. Scales (score or
ordered labels) come from ableaudit.stats.SCALES.
"""

import pyarrow as pa

from ableaudit.warehouse.ibis_compat import from_connection
from ableaudit.stats import PAIRWISE_SCHEMA, SCALES, pairwise_agreement

ARROW = {"str": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("int_ratings")  # declares the dependency for dbt's DAG

    con = from_connection(getattr(session, "_cursor", session))
    ratings = (con.table("int_ratings", database=(dbt.this.database, dbt.this.schema))
               .select("item_id", "dimension", "rater_id", "rater_kind", "value").to_pyarrow().to_pandas())

    out = pairwise_agreement(ratings, scales=SCALES)
    schema = pa.schema([(c, ARROW[t]) for c, t in PAIRWISE_SCHEMA.items()])
    return pa.Table.from_pandas(out[list(PAIRWISE_SCHEMA)], schema=schema, preserve_index=False)
