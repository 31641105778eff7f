"""Bootstrap CIs of group_bias's deltas (rate of a group minus the rate over all pairs).

Thin wiring over ableaudit.audit.vision.group_delta_ci: the included vision pairs of
int_pair_groups with known identity, per task, model, arm, image set,
temperature and measure; whole images are resampled var('bootstrap_samples')
times, seeded by var('bootstrap_seed'). The mart group_bias joins these CIs to
the rates and deltas it computes in SQL.
"""

from ableaudit.audit.vision import GROUP_CI_SCHEMA, GROUPINGS, group_delta_ci
from ableaudit.dbt.models import bootstrap_settings, read, to_arrow

COLUMNS = [
    "task",
    "model_id",
    "arm",
    "query_set",
    "temperature",
    "measure_id",
    "query_id",
    "outcome",
    *GROUPINGS,
]


def model(dbt, session):
    dbt.config(materialized="table")
    n_boot = dbt.config.meta_get(
        "bootstrap_samples"
    )  # each meta_get alone on its line: dbt parses these calls
    seed = dbt.config.meta_get("bootstrap_seed")
    n_boot, seed = bootstrap_settings(n_boot, seed)

    pairs = read(
        dbt.ref("int_pair_groups"), COLUMNS, where="task = 'vision' and has_identity and included"
    )
    out = group_delta_ci(pairs, n_boot=n_boot, seed=seed) if len(pairs) else pairs.iloc[0:0]
    return to_arrow(out, GROUP_CI_SCHEMA)
