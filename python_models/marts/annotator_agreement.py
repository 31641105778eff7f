"""Mart `annotator_agreement`: agreement among all raters of one kind, per dimension.

Thin wiring over ableaudit.stats.annotator_agreement on int_ratings: Fleiss'
kappa and Krippendorff's alpha (interval for scores, nominal for labels), once
over the human annotators and once over the LLM judges (when there are ratings
of that kind for the dimension).
"""

import pandas as pd
import pyarrow as pa

from ableaudit.warehouse.ibis_compat import from_connection
from ableaudit.stats import ANNOTATOR_SCHEMA, SCALES, annotator_agreement

ARROW = {"str": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
KINDS = ("human", "judge", "detector")


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("int_ratings")  # declares the dependency for dbt's DAG

    con = from_connection(getattr(session, "_cursor", session))
    ratings = (con.table("int_ratings", database=(dbt.this.database, dbt.this.schema))
               .select("item_id", "dimension", "rater_id", "rater_kind", "value").to_pyarrow().to_pandas())

    parts = [annotator_agreement(ratings, scales=SCALES, kinds=(kind,)) for kind in KINDS]
    out = pd.concat(parts, ignore_index=True)
    schema = pa.schema([(c, ARROW[t]) for c, t in ANNOTATOR_SCHEMA.items()])
    return pa.Table.from_pandas(out[list(ANNOTATOR_SCHEMA)], schema=schema, preserve_index=False)
