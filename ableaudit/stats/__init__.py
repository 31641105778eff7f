"""The statistics layer of the warehouse's statistics marts, in plain pandas/scipy.

Each function takes long-format DataFrames and returns a DataFrame with a fixed,
documented schema (the *_SCHEMA dicts: column -> pandas dtype), also for empty
input, so that a dbt python model can return it as is. A statistic that cannot be
computed (n < 2, zero variance, one category only, ...) is NULL (NaN) and the row's
`reason` says why; no function raises on degenerate data (only on missing columns).

    paired.significance          mart `significance`
    clustered.query_t_test       the query-level test `significance` judges a slice by
    clustered.minimum_detectable_diff / is_significant
                                 `significance`: min_detectable_diff, significant
    heterogeneity.heterogeneity  mart `heterogeneity`
    paired.model_comparison      mart `model_comparison`
    paired.oneway_anova          ANOVA with degenerate inputs decided exactly
    sensitivity.threshold_sensitivity
                                 mart `threshold_sensitivity` (counts the flags that
                                 macro is_degraded sets in int_pair_thresholds)
    ranks.spearman_test          Spearman's rho with an exact p for few units
    agreement.pairwise_agreement mart `agreement`
    agreement.annotator_agreement mart `annotator_agreement`
    agreement.disputed_items / final_scores
                                 mart `disputed_items`
    agreement.stratified_sample, validate_annotations, normalize_labels, SCALES
                                 `ableaudit export annotation-sample` / `import annotations`
    scaling.scaling / scaling_points
                                 mart `scaling`
    reuse.reuse_or_compute       a mart's rows computed again only for the groups whose
                                 inputs changed (`significance`)
"""

from ableaudit.stats import clustered
from ableaudit.stats.agreement import (
    ANNOTATOR_SCHEMA,
    DISPUTED_SCHEMA,
    FINAL_SCORES_SCHEMA,
    PAIRWISE_SCHEMA,
    SCALES,
    annotator_agreement,
    disputed_items,
    final_scores,
    kind_pair,
    normalize_labels,
    pairwise_agreement,
    sample_shortfall,
    stratified_sample,
    validate_annotations,
)
from ableaudit.stats.clustered import is_significant, minimum_detectable_diff, query_t_test
from ableaudit.stats.heterogeneity import HETEROGENEITY_SCHEMA, heterogeneity
from ableaudit.stats.paired import (
    MODEL_COMPARISON_SCHEMA,
    SIGNIFICANCE_SCHEMA,
    cluster_bootstrap_ci,
    model_comparison,
    oneway_anova,
    significance,
)
from ableaudit.stats.ranks import EXACT_SPEARMAN_MAX_N, SpearmanResult, spearman_test
from ableaudit.stats.scaling import SCALING_POINTS_SCHEMA, SCALING_SCHEMA, scaling, scaling_points
from ableaudit.stats.sensitivity import (
    DEFAULT_THRESHOLDS,
    THRESHOLD_SENSITIVITY_SCHEMA,
    threshold_sensitivity,
)

__all__ = [
    "ANNOTATOR_SCHEMA",
    "DEFAULT_THRESHOLDS",
    "DISPUTED_SCHEMA",
    "EXACT_SPEARMAN_MAX_N",
    "FINAL_SCORES_SCHEMA",
    "HETEROGENEITY_SCHEMA",
    "MODEL_COMPARISON_SCHEMA",
    "PAIRWISE_SCHEMA",
    "SCALES",
    "SCALING_POINTS_SCHEMA",
    "SCALING_SCHEMA",
    "SIGNIFICANCE_SCHEMA",
    "THRESHOLD_SENSITIVITY_SCHEMA",
    "SpearmanResult",
    "annotator_agreement",
    "cluster_bootstrap_ci",
    "clustered",
    "disputed_items",
    "final_scores",
    "heterogeneity",
    "is_significant",
    "kind_pair",
    "minimum_detectable_diff",
    "model_comparison",
    "normalize_labels",
    "oneway_anova",
    "pairwise_agreement",
    "query_t_test",
    "sample_shortfall",
    "scaling",
    "scaling_points",
    "significance",
    "spearman_test",
    "stratified_sample",
    "threshold_sensitivity",
    "validate_annotations",
]
