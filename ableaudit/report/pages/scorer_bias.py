"""The headline's masked blocks: each scorer's rate beside its masked variant's, and what each
scorer does with a category's disability words alone (mart ``scorer_bias``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from ableaudit.report import format as fmt
from ableaudit.report.records import Paragraph, Source, Table
from ableaudit.report.tables import Context, ci_cell, grouped, key_of, metric_label

DEGRADATION_KEY = ["task", "model_id", "arm", "query_set", "metric", "slice", "slice_value"]
BIAS_KEY = ["scorer", "disability_id"]


def masked_blocks(ctx: Context) -> list[Any]:
    """Nothing before a build that made mart scorer_bias."""
    bias = ctx.marts.frame("scorer_bias", "", "scorer, sort_order")
    if bias.empty:
        return []
    deg = ctx.marts.frame(
        "degradation", "slice = 'overall'", "task, query_set, model_id, arm, metric"
    )
    variants = dict(bias[["scorer", "masked_scorer"]].drop_duplicates().itertuples(index=False))
    blocks: list[Any] = [
        Paragraph(
            "A lexicon or classifier scorer reacts to the disability words an answer echoes "
            '(VADER\'s lexicon scores "blind" and "disorder" -1.7, "depression" -2.7), so part of '
            "its degradation rate comes from the words, not from the model. Its masked variant scores "
            "both answers of each pair with the category's disability words replaced by a neutral "
            "token; the difference between the two rates is what the words added."
        )
    ]
    for (task, query_set), g in grouped(deg, ["task", "query_set"]):
        rows = _side_by_side(g, variants, ctx.names.metric)
        if rows:
            blocks.append(
                Table(
                    caption=f"Each scorer beside its masked variant ({task}, query set {query_set}): "
                    "degradation rate in %, its 95 % Wilson interval and the pairs counted",
                    columns=[
                        "Model",
                        "Arm",
                        "Metric",
                        "Rate (%)",
                        "95 % CI",
                        "Pairs",
                        "Masked metric",
                        "Masked rate (%)",
                        "Masked 95 % CI",
                        "Masked pairs",
                    ],
                    rows=rows,
                    row_headers=3,
                )
            )
    blocks.append(_bias_table(bias, ctx.names.metric))
    return blocks


def _rate_cells(r: pd.Series) -> list:
    k = key_of(r, DEGRADATION_KEY)
    return [
        fmt.fig(fmt.pct(r.degradation_pct), Source("degradation", "degradation_pct", k))
        if fmt.is_finite(r.degradation_pct)
        else fmt.label(fmt.NA),
        ci_cell(r, "degradation_ci_low_pct", "degradation_ci_high_pct", "degradation", k, 1, False),
        fmt.fig(fmt.count(r.n_pairs), Source("degradation", "n_pairs", k)),
    ]


def _side_by_side(
    g: pd.DataFrame, variants: dict[str, str], label: Callable[[str], str] = metric_label
) -> list[list]:
    rows = []
    by_metric = {
        key: r for key, r in ((tuple(r[["model_id", "arm", "metric"]]), r) for _, r in g.iterrows())
    }
    for (model, arm, metric), r in by_metric.items():
        masked = by_metric.get((model, arm, variants.get(metric)))
        if masked is None:
            continue
        rows.append(
            [
                fmt.row_header(model),
                fmt.row_header(arm),
                fmt.row_header(label(metric)),
                *_rate_cells(r),
                fmt.label(label(masked.metric)),
                *_rate_cells(masked),
            ]
        )
    return rows


def _bias_table(bias: pd.DataFrame, label: Callable[[str], str] = metric_label) -> Table:
    rows = []
    for _, r in bias.iterrows():
        k = key_of(r, BIAS_KEY)

        def cell(column: str, text: str, k: dict = k) -> Any:
            return (
                fmt.fig(text, Source("scorer_bias", column, k))
                if text != fmt.NA
                else fmt.label(text)
            )

        rows.append(
            [
                fmt.row_header(label(r.scorer)),
                fmt.row_header(r.display_name),
                cell("n_probes", fmt.count(r.n_probes)),
                cell("n_terms_shifted", fmt.count(r.n_terms_shifted)),
                cell("mean_shift", fmt.signed(r.mean_shift, 3)),
                cell("min_shift", fmt.signed(r.min_shift, 3)),
                fmt.label(r.min_shift_term),
                cell("degradation_pct", fmt.pct(r.degradation_pct)),
                fmt.label(r.status),
            ]
        )
    return Table(
        caption="What each scorer does with a category's disability words alone (mart scorer_bias): "
        "each term of the category's mask set inside neutral carrier sentences, against the same "
        "sentences with the neutral token; the probes a designed set, not a sample",
        columns=[
            "Scorer",
            "Category",
            "Probes",
            "Terms that move the score",
            "Mean shift",
            "Largest drop",
            "Term with the largest drop",
            "Probes degraded by the words (%)",
            "Status",
        ],
        rows=rows,
        row_headers=2,
        note="A scorer that cannot score (Regard without its classifier) shows its status and n/a.",
    )
