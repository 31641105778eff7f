"""Mart `disputed_items`: the items human annotators disagree on (AccessEval C.2, Eq. 2-3).

Thin wiring over ableaudit.stats.disputed_items on the human ratings of
int_ratings: score dimensions only; an (item, dimension) is disputed when the
sample sd of its annotators' scores exceeds var('disputed_sd_threshold')
(default 2); its mean is the final score.
"""

from ableaudit.dbt.models import meta, read, to_arrow
from ableaudit.judges.dimensions import scales as dimension_scales
from ableaudit.stats import DISPUTED_SCHEMA, SCALES, disputed_items

SCHEMA = {
    "item_id": "str",
    "item_kind": "str",
    **{c: t for c, t in DISPUTED_SCHEMA.items() if c != "item_id"},
    "sd_threshold": "float64",
}


def model(dbt, session):
    dbt.config(materialized="table")
    # the scales of the judges' dimension sets (a user's dimensions), the built-in ones as SCALES
    defined = read(
        dbt.ref("int_judge_dimensions"),
        ["dimension", "answer_kind", "value_labels", "first_landed_at"],
    )
    scales = {**dimension_scales(defined.to_dict("records")), **SCALES}
    threshold = dbt.config.meta_get("disputed_sd_threshold")  # on its own: dbt parses the call
    threshold = meta(threshold, 2, float)

    human = read(
        dbt.ref("int_ratings"),
        ["item_id", "item_kind", "dimension", "rater_id", "rater_kind", "value"],
        where="rater_kind = 'human'",
    )
    out = disputed_items(human, sd_threshold=threshold, kinds=("human",), scales=scales)
    kinds = human.drop_duplicates("item_id").set_index("item_id")["item_kind"]
    out["item_kind"] = out["item_id"].map(kinds).astype("str") if len(out) else out["item_id"]
    out["sd_threshold"] = threshold
    return to_arrow(out, SCHEMA)
