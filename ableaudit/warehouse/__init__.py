"""The warehouse: one DuckDB file, its raw layer, the landing layer and the published copy.

Only ``ableaudit.warehouse.landing`` writes ``raw.*``; everything downstream of
it is built by dbt.
"""

from ableaudit.warehouse.connection import (
    DEFAULT_WAREHOUSE,
    WRITE_LOCK,
    connect,
    ensure_raw_schema,
    warehouse_path,
)

__all__ = ["DEFAULT_WAREHOUSE", "WRITE_LOCK", "connect", "ensure_raw_schema", "warehouse_path"]
