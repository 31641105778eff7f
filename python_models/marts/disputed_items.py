"""Mart `disputed_items`: the items human annotators disagree on (AccessEval C.2, Eq. 2-3).

Thin wiring over ableaudit.stats.disputed_items on the human ratings of
int_ratings: score dimensions only; an (item, dimension) is disputed when the
sample sd of its annotators' scores exceeds var('disputed_sd_threshold')
(default 2); its mean is the final score.
"""

import pyarrow as pa

from ableaudit.warehouse.ibis_compat import from_connection
from ableaudit.stats import DISPUTED_SCHEMA, SCALES, disputed_items

ARROW = {"str": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
SCHEMA = {"item_id": "str", "item_kind": "str",
          **{c: t for c, t in DISPUTED_SCHEMA.items() if c != "item_id"}, "sd_threshold": "float64"}


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("int_ratings")  # declares the dependency for dbt's DAG
    threshold = dbt.config.meta_get("disputed_sd_threshold")  # on its own: dbt parses the call
    threshold = float(2 if threshold in (None, "") else threshold)

    con = from_connection(getattr(session, "_cursor", session))
    ratings = con.table("int_ratings", database=(dbt.this.database, dbt.this.schema))
    human = (ratings.filter(ratings.rater_kind == "human")
             .select("item_id", "item_kind", "dimension", "rater_id", "rater_kind", "value")
             .to_pyarrow().to_pandas())

    out = disputed_items(human, sd_threshold=threshold, kinds=("human",), scales=SCALES)
    kinds = human.drop_duplicates("item_id").set_index("item_id")["item_kind"]
    out["item_kind"] = out["item_id"].map(kinds).astype("str") if len(out) else out["item_id"]
    out["sd_threshold"] = threshold
    schema = pa.schema([(c, ARROW[t]) for c, t in SCHEMA.items()])
    return pa.Table.from_pandas(out[list(SCHEMA)], schema=schema, preserve_index=False)
