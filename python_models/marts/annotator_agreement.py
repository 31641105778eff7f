"""Mart `annotator_agreement`: agreement among all raters of one kind, per dimension.

Thin wiring over ableaudit.stats.annotator_agreement on int_ratings: Fleiss'
kappa and Krippendorff's alpha (interval for scores, nominal for labels), once
over the human annotators and once over the LLM judges (when there are ratings
of that kind for the dimension).
"""

import pandas as pd

from ableaudit.dbt.models import read, to_arrow
from ableaudit.stats import ANNOTATOR_SCHEMA, SCALES, annotator_agreement

KINDS = ("human", "judge", "detector")


def model(dbt, session):
    dbt.config(materialized="table")
    ratings = read(
        dbt.ref("int_ratings"), ["item_id", "dimension", "rater_id", "rater_kind", "value"]
    )
    parts = [annotator_agreement(ratings, scales=SCALES, kinds=(kind,)) for kind in KINDS]
    return to_arrow(pd.concat(parts, ignore_index=True), ANNOTATOR_SCHEMA)
