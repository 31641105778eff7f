"""Mart `annotator_agreement`: agreement among all raters of one kind, per dimension.

Thin wiring over ableaudit.stats.annotator_agreement on int_ratings: Fleiss'
kappa and Krippendorff's alpha (interval for scores, nominal for labels), once
over the human annotators and once over the LLM judges (when there are ratings
of that kind for the dimension).
"""

import pandas as pd

from ableaudit.dbt.models import read, to_arrow
from ableaudit.judges.dimensions import scales as dimension_scales
from ableaudit.stats import ANNOTATOR_SCHEMA, SCALES, annotator_agreement

KINDS = ("human", "judge", "detector")


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
    parts = [annotator_agreement(ratings, scales=scales, kinds=(kind,)) for kind in KINDS]
    return to_arrow(pd.concat(parts, ignore_index=True), ANNOTATOR_SCHEMA)
