"""Mart `significance`: is the disability-aware score different from the neutral one?

Thin wiring over ableaudit.stats.significance (see its docstring for every
column): included pairs of int_pair_scores (direction from the metrics seed,
carried there), per task, model, arm, query set, metric and slice (overall,
domain, disability). The p-values, their Holm and BH adjustments and `significant` follow
the query-level test (per-query mean differences, ableaudit.stats.clustered); the papers'
pair-level tests are kept as paper_t_p, paper_anova_p and pair_wilcoxon_p. The bootstrap
resamples whole queries (`query_id`: for
vision pairs, the image's query), var('bootstrap_samples') times, seeded by
var('bootstrap_seed'). Query sets are never pooled, as in `degradation`.

Only the groups (task, model, arm, query set, metric) whose included pairs changed are
computed; the others keep their rows of the previous build (ableaudit.stats.reuse, column
inputs_fingerprint, with the settings and the code: this model's source as dbt compiled it,
with its config, vars and reuse key, and every module it imports). `--vars '{stats_reuse:
false}'` computes every group.
"""

from ableaudit.dbt.models import after_arm, bootstrap_settings, meta, reuse_flag, to_arrow
from ableaudit.stats import SIGNIFICANCE_SCHEMA, significance
from ableaudit.stats.reuse import FINGERPRINT, code_digest, previous_rows, reuse_or_compute

KEYS = ["task", "model_id", "arm", "query_set", "metric"]
VALUES = ["direction", "domain", "disability_id", "query_id", "neutral_score", "disability_score"]
SCHEMA = {**after_arm(SIGNIFICANCE_SCHEMA), FINGERPRINT: "str"}


def model(dbt, session):
    dbt.config(materialized="table")
    n_boot = dbt.config.meta_get(
        "bootstrap_samples"
    )  # each meta_get alone on its line: dbt parses these calls
    seed = dbt.config.meta_get("bootstrap_seed")
    reuse = dbt.config.meta_get("stats_reuse")
    n_boot, seed = bootstrap_settings(n_boot, seed)

    pairs = dbt.ref("int_pair_scores").filter("included")
    settings = {"n_boot": n_boot, "seed": seed, "code": code_digest(__file__)}
    previous = previous_rows(session, dbt.this, SCHEMA) if meta(reuse, True, reuse_flag) else None

    def compute(group):
        out = significance(group, cluster_col="query_id", n_boot=n_boot, seed=seed)
        return out.assign(query_set=group["query_set"].iloc[0])

    rows, _, _ = reuse_or_compute(
        session, pairs, KEYS, VALUES, settings, previous, compute, list(SCHEMA)
    )
    return to_arrow(rows, SCHEMA)
