"""The warehouse: one DuckDB file, its raw layer, the landing layer and the published copy.

Only the landing layer writes ``raw.*``: ``ableaudit.warehouse.landing`` and the writers
beside it on its primitives (``batch_landing``, ``run_lease``, ``reference_landing``,
``forgetting``, ``queryset_landing``); everything downstream of it is built by dbt.
"""

from ableaudit.warehouse.connection import (
    DEFAULT_WAREHOUSE,
    WRITE_LOCK,
    WarehouseNotFound,
    connect,
    ensure_raw_schema,
    existing_warehouse,
    warehouse_path,
)

__all__ = [
    "DEFAULT_WAREHOUSE",
    "WRITE_LOCK",
    "WarehouseNotFound",
    "connect",
    "ensure_raw_schema",
    "existing_warehouse",
    "warehouse_path",
]
