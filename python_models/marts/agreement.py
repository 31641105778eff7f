"""Mart `agreement`: how well two raters agree, for every pair of raters and dimension.

Thin wiring over ableaudit.stats.pairwise_agreement on int_ratings: humans,
LLM judges and LoRA detectors, on the items both rated. Scales (score or
ordered labels) come from ableaudit.stats.SCALES.
"""

from ableaudit.dbt.models import read, to_arrow
from ableaudit.judges.dimensions import scales as dimension_scales
from ableaudit.stats import PAIRWISE_SCHEMA, SCALES, pairwise_agreement


def model(dbt, session):
    dbt.config(materialized="table")
    # the scales of the judges' dimension sets (a user's dimensions), the built-in ones as SCALES
    defined = read(
        dbt.ref("int_judge_dimensions"),
        ["dimension", "answer_kind", "value_labels", "first_landed_at"],
    )
    scales = {**dimension_scales(defined.to_dict("records")), **SCALES}
    ratings = read(
        dbt.ref("int_ratings"), ["item_id", "dimension", "rater_id", "rater_kind", "value"]
    )
    return to_arrow(pairwise_agreement(ratings, scales=scales), PAIRWISE_SCHEMA)
