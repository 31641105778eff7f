"""Bootstrap CIs of group_bias's deltas (rate of a group minus the rate over all pairs).

Thin wiring over ableaudit.audit.vision.group_delta_ci: the included vision pairs of
int_pair_groups with known identity, per task, model, arm, image set,
temperature and measure; whole images are resampled var('bootstrap_samples')
times, seeded by var('bootstrap_seed'). The mart group_bias joins these CIs to
the rates and deltas it computes in SQL.
"""

import pandas as pd
import pyarrow as pa

from ableaudit.warehouse.ibis_compat import from_connection
from ableaudit.audit.vision import GROUP_CI_SCHEMA, GROUPINGS, group_delta_ci

ARROW = {"str": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
COLUMNS = ["task", "model_id", "arm", "query_set", "temperature", "measure_id", "query_id", "outcome", *GROUPINGS]


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("int_pair_groups")  # declares the dependency for dbt's DAG
    n_boot = int(dbt.config.meta_get("bootstrap_samples") or 2000)
    seed = int(dbt.config.meta_get("bootstrap_seed") or 0)

    con = from_connection(getattr(session, "_cursor", session))
    groups = con.table("int_pair_groups", database=(dbt.this.database, dbt.this.schema))
    kept = groups.filter((groups.task == "vision") & groups.has_identity & groups.included)
    pairs = kept.select(*COLUMNS).to_pyarrow().to_pandas()

    out = group_delta_ci(pairs, n_boot=n_boot, seed=seed) if len(pairs) else pd.DataFrame(columns=list(GROUP_CI_SCHEMA))
    schema = pa.schema([(c, ARROW[t]) for c, t in GROUP_CI_SCHEMA.items()])
    return pa.Table.from_pandas(out[list(GROUP_CI_SCHEMA)], schema=schema, preserve_index=False)
