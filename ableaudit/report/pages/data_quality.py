"""The data quality table's rows, as the report renders them."""

from __future__ import annotations

import pandas as pd

from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Cell,
    Source,
)
from ableaudit.report.tables import key_of, none_if_missing


def data_quality_rows(dq: pd.DataFrame) -> list[list[Cell]]:
    """Every data_quality row, for the page of every exclusion."""
    rows = []
    for r in dq.itertuples():
        k = key_of(
            r._asdict(),
            ["run_id", "task", "model_id", "arm", "query_set", "area", "metric", "status"],
        )
        rows.append(
            [
                fmt.row_header(r.model_id),
                fmt.row_header(r.arm),
                fmt.row_header(r.task),
                fmt.row_header(none_if_missing(r.run_id) or "none"),
                fmt.row_header(r.area),
                fmt.row_header(none_if_missing(r.metric) or "none"),
                fmt.row_header(r.status),
                fmt.fig(fmt.count(r.n_rows), Source("data_quality", "n_rows", k)),
            ]
        )
    return rows
