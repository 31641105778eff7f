"""Mart `heterogeneity`: do the degradation rates differ across disability categories, or across
domains?

Thin wiring over ableaudit.stats.heterogeneity (see its docstring for every column): the
included pairs of int_pair_scores with their degraded flag (macro is_degraded), per task,
model, arm, query set and metric; Cochran's Q across categories (a neutral answer is a
block), a one-way ANOVA of per-query rates across domains, the worst and best level and the
gap's interval resampling whole queries, var('bootstrap_samples') times, seeded by
var('bootstrap_seed'). Query sets are never pooled.

Only the groups (task, model, arm, query set, metric) whose included pairs changed are
computed; the others keep their rows of the previous build (ableaudit.stats.reuse, as in
`significance`: column inputs_fingerprint covers the rows, the settings and the code).
`--vars '{stats_reuse: false}'` computes every group.
"""

from ableaudit.dbt.models import after_arm, bootstrap_settings, meta, reuse_flag, to_arrow
from ableaudit.stats import HETEROGENEITY_SCHEMA, heterogeneity
from ableaudit.stats.reuse import FINGERPRINT, code_digest, previous_rows, reuse_or_compute

KEYS = ["task", "model_id", "arm", "query_set", "metric"]
VALUES = ["domain", "disability_id", "query_id", "neutral_generation_id", "degraded"]
SCHEMA = {**after_arm(HETEROGENEITY_SCHEMA), FINGERPRINT: "str"}


def model(dbt, session):
    dbt.config(materialized="table")
    n_boot = dbt.config.meta_get(
        "bootstrap_samples"
    )  # each meta_get alone on its line: dbt parses these calls
    seed = dbt.config.meta_get("bootstrap_seed")
    reuse = dbt.config.meta_get("stats_reuse")
    n_boot, seed = bootstrap_settings(n_boot, seed)

    pairs = dbt.ref("int_pair_scores").filter("included and degraded is not null")
    settings = {"n_boot": n_boot, "seed": seed, "code": code_digest(__file__)}
    previous = previous_rows(session, dbt.this, SCHEMA) if meta(reuse, True, reuse_flag) else None

    def compute(group):
        out = heterogeneity(group, n_boot=n_boot, seed=seed)
        return out.assign(query_set=group["query_set"].iloc[0])

    rows, _, _ = reuse_or_compute(
        session, pairs, KEYS, VALUES, settings, previous, compute, list(SCHEMA)
    )
    return to_arrow(rows, SCHEMA)
