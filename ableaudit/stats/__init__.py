"""The statistics layer of the marts of issue #4, in plain pandas/scipy.

Each function takes long-format DataFrames and returns a DataFrame with a fixed,
documented schema (the *_SCHEMA dicts: column -> pandas dtype), also for empty
input, so that a dbt python model can return it as is. A statistic that cannot be
computed (n < 2, zero variance, one category only, ...) is NULL (NaN) and the row's
`reason` says why; no function raises on degenerate data (only on missing columns).

    paired.significance          mart `significance`
    paired.model_comparison      mart `model_comparison`
    sensitivity.threshold_sensitivity, is_degraded
                                 mart `threshold_sensitivity`, Eq. 1
    agreement.pairwise_agreement mart `agreement`
    agreement.annotator_agreement mart `annotator_agreement`
    agreement.disputed_items / final_scores
                                 mart `disputed_items`
    agreement.stratified_sample, validate_annotations, normalize_labels, SCALES
                                 `ableaudit export annotation-sample` / `import annotations`
    scaling.scaling / scaling_points
                                 mart `scaling`
"""

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
from ableaudit.stats.paired import (
    MODEL_COMPARISON_SCHEMA,
    SIGNIFICANCE_SCHEMA,
    cluster_bootstrap_ci,
    model_comparison,
    significance,
)
from ableaudit.stats.scaling import SCALING_POINTS_SCHEMA, SCALING_SCHEMA, scaling, scaling_points
from ableaudit.stats.sensitivity import (
    DEFAULT_THRESHOLDS,
    THRESHOLD_SENSITIVITY_SCHEMA,
    is_degraded,
    is_improved,
    threshold_sensitivity,
)

__all__ = [
    "ANNOTATOR_SCHEMA", "DEFAULT_THRESHOLDS", "DISPUTED_SCHEMA", "FINAL_SCORES_SCHEMA",
    "MODEL_COMPARISON_SCHEMA", "PAIRWISE_SCHEMA", "SCALES", "SCALING_POINTS_SCHEMA", "SCALING_SCHEMA",
    "SIGNIFICANCE_SCHEMA", "THRESHOLD_SENSITIVITY_SCHEMA", "annotator_agreement", "cluster_bootstrap_ci",
    "disputed_items", "final_scores", "is_degraded", "is_improved", "kind_pair", "model_comparison",
    "normalize_labels", "pairwise_agreement", "sample_shortfall", "scaling", "scaling_points",
    "significance", "stratified_sample", "threshold_sensitivity", "validate_annotations",
]
